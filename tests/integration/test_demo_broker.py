"""python -m kafka_ds.demo.broker: the documented way to start a broker to try things. It
says where it listens, serves Kafka clients there, and stops on SIGTERM (as on Ctrl-C)."""

import signal
import subprocess
import sys

from tests.support.brokers import consume_confluent, free_port, produce_confluent


def test_demo_broker_starts_serves_and_stops():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "kafka_ds.demo.broker", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert f"Tansu is listening on 127.0.0.1:{port}" in line, line
        assert "Ctrl-C stops it" in line
        bootstrap = f"127.0.0.1:{port}"
        produce_confluent(bootstrap, "tried", [b"a", b"b"], partition=0)
        assert [m.value for m in consume_confluent(bootstrap, "tried", expected=2)] == [b"a", b"b"]
    finally:
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and "stopped" in out
