"""Apicurio Registry (another team's Schema Registry) from Maven Central, for the test suite.

The suite's real Schema Registry: kafka_ds's typed values are proven against its
Confluent-compatible API, ``<base>/apis/ccompat/v7`` (``Apicurio.url``). A launcher for
people::

    python -m tests.support.apicurio [--tls DIR] [--basic-auth USER:SECRET]

prints the registry's URL and its Confluent-compatible URL and runs until Ctrl-C or SIGTERM.

The server: Central serves it ready-built as ``io.apicurio:apicurio-registry-app:V:tar.gz:all``
(159 MB, a ``quarkus-run.jar`` layout). ``tests/support/maven/apicurio/pom.xml`` has Maven
copy it out of its own cache (``~/.m2``); it is unpacked once per version into
``.venv-kafka/apicurio-registry-V/`` under a file lock. Nothing is built or committed.

It needs Java 21 or later (3.3 is compiled for 21; the suite's default Java is 17):
``KAFKA_DS_APICURIO_JAVA`` (a ``java`` or a JDK folder), else ``JAVA_HOME`` when it is 21+,
else the newest 21+ JDK under ``/usr/lib/jvm``.

Storage is in memory (Apicurio's default): stopping it drops every schema. Both HTTP ports,
the API's and Quarkus's management port, are bound to 127.0.0.1 on free ports: left to its
defaults the management interface listens on 0.0.0.0:9000. ``tls`` adds an HTTPS port with a
certificate of a private CA (``trustme``); ``basic_auth`` makes every request need HTTP basic
auth (Quarkus's embedded user store, no Keycloak).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support import procfs
from tests.support.apache_kafka import CACHE_DIR, _locked, _pid_alive
from tests.support.brokers import HOST, BrokerError, _log_tail, free_ports
from tests.support.guarded import jvm_environment, start_guarded
from tests.support.registry_tls import TlsFiles

VERSION = "3.3.3"
POM = Path(__file__).resolve().with_name("maven") / "apicurio" / "pom.xml"
CCOMPAT_PATH = "/apis/ccompat/v7"
MINIMUM_JAVA = 21
JAVA_OVERRIDE = "KAFKA_DS_APICURIO_JAVA"

# The JVM: C1 only and the serial collector, as the suite's other JVMs (start-up on a
# 2-core machine is mostly compilation), and a bounded heap. JAVA_TOOL_OPTIONS of the suite
# is not passed on: its class archive is Spark's, made by Java 17.
JVM_OPTIONS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-Xmx256m",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)


class RegistryStartError(BrokerError):
    """Apicurio could not be fetched or started (the message says what to do)."""


# --- Java 21+ ---------------------------------------------------------------------------------


def _java_major(java: str) -> int | None:
    """The feature release of a ``java`` executable: from its JDK's ``release`` file, else
    from ``java -version``."""
    home = Path(os.path.realpath(java)).parent.parent
    release = home / "release"
    text = release.read_text(errors="replace") if release.exists() else ""
    if not text:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            text = subprocess.run(
                [java, "-version"], capture_output=True, text=True, timeout=30
            ).stderr
    found = re.search(r'version "?(\d+)(?:\.(\d+))?', text, re.I) or re.search(
        r'JAVA_VERSION="(\d+)', text
    )
    if not found:
        return None
    major = int(found.group(1))
    # Java 8 and older call themselves 1.x
    return int(found.group(2) or 0) if major == 1 else major


def _java_in(path: str) -> str:
    """``path`` names a ``java`` or a JDK folder: its ``java``."""
    candidate = Path(path)
    return str(candidate / "bin" / "java") if candidate.is_dir() else str(candidate)


def java_executable() -> str:
    """A ``java`` of release 21 or later (see the module's docstring for where it looks)."""
    override = os.environ.get(JAVA_OVERRIDE)
    if override:
        java = _java_in(override)
        major = _java_major(java) if os.path.exists(java) else None
        if major is None or major < MINIMUM_JAVA:
            raise RegistryStartError(
                f"{JAVA_OVERRIDE}={override!r}: Apicurio Registry {VERSION} needs Java "
                f"{MINIMUM_JAVA} or later, found {major or 'no java there'}"
            )
        return java
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(_java_in(os.environ["JAVA_HOME"]))
    newest_first = sorted(glob.glob("/usr/lib/jvm/*/bin/java"), key=_version_key, reverse=True)
    candidates.extend(newest_first)
    for java in candidates:
        if os.path.exists(java) and (_java_major(java) or 0) >= MINIMUM_JAVA:
            return java
    raise RegistryStartError(
        f"Apicurio Registry {VERSION} needs Java {MINIMUM_JAVA} or later; none found in "
        f"JAVA_HOME or /usr/lib/jvm (checked: {', '.join(candidates) or 'nothing'}). Install "
        "one (e.g. apt-get install openjdk-21-jre-headless, or a Temurin 21/25 from "
        f"adoptium.net) and, if it is elsewhere, set {JAVA_OVERRIDE} to its java or its folder"
    )


def _version_key(java: str) -> int:
    return _java_major(java) or 0


# --- the server's files -------------------------------------------------------------------------


def install(version: str = VERSION) -> Path:
    """The unpacked server (its folder holds ``quarkus-run.jar``): from Maven Central through
    Maven once, then from the cache folder."""
    target = CACHE_DIR / f"apicurio-registry-{version}"
    with _locked(CACHE_DIR / f"apicurio-registry-{version}.lock"):
        if (target / "quarkus-run.jar").exists():
            return target
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RegistryStartError(
                "Apicurio Registry comes from Maven Central through Maven: install it "
                "(apt-get install maven) and put `mvn` on PATH"
            )
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=CACHE_DIR, prefix="apicurio-download-") as scratch:
            run = subprocess.run(
                [
                    mvn,
                    "-q",
                    "-B",
                    "-f",
                    str(POM),
                    f"-Dapicurio.version={version}",
                    f"-Dapicurio.output={scratch}",
                    "dependency:copy",
                ],
                capture_output=True,
                text=True,
                timeout=1200,
            )
            archive = Path(scratch) / f"apicurio-registry-app-{version}-all.tar.gz"
            if run.returncode != 0 or not archive.exists():
                raise RegistryStartError(
                    f"mvn could not fetch io.apicurio:apicurio-registry-app:{version}:tar.gz:all "
                    f"(rc={run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
                )
            unpacked = Path(scratch) / "unpacked"
            with tarfile.open(archive) as tar:
                if hasattr(tarfile, "data_filter"):  # Python >= 3.12 (and patched 3.10/3.11)
                    tar.extractall(unpacked, filter="data")
                else:  # pragma: no cover - older Pythons: the archive is Maven Central's
                    tar.extractall(unpacked)
            if not (unpacked / "quarkus-run.jar").exists():
                raise RegistryStartError(f"{archive.name} holds no quarkus-run.jar")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(unpacked, target)
        print(
            f"fetched Apicurio Registry {version} from Maven Central in "
            f"{time.monotonic() - started:.0f} s",
            file=sys.stderr,
        )
        return target


# --- the server ---------------------------------------------------------------------------------


class Apicurio:
    """One Apicurio Registry JVM on 127.0.0.1. ``url`` is its Confluent-compatible API (what
    ``schema.registry.url`` and confluent-kafka's ``SchemaRegistryClient`` take);
    ``https_url`` the same over TLS when ``tls`` was given; ``tls`` holds the CA file."""

    def __init__(
        self,
        *,
        tls: TlsFiles | None = None,
        server_certificate: tuple[str, str] | None = None,
        basic_auth: str | None = None,
        owner_pid: int | None = None,
        start_timeout: float = 120.0,
    ):
        """``tls`` and ``server_certificate`` (PEM files of the certificate and its key, for
        127.0.0.1) go together; ``basic_auth``: ``user:secret``, then every request needs it."""
        if (tls is None) != (server_certificate is None):
            raise ValueError("tls and server_certificate go together")
        self.tls = tls
        self.basic_auth = basic_auth
        self.owner_pid = owner_pid or os.getpid()
        self.directory = tempfile.mkdtemp(prefix="kafka_ds-apicurio-")
        self.log_path = os.path.join(self.directory, "stdout.log")
        http_port, management_port, https_port = free_ports(3)
        self.port = http_port
        self.management_port = management_port
        self.https_port = https_port if tls else None
        self.java_pid: int | None = None
        self.owned = True
        self._guard: subprocess.Popen | None = None
        try:
            self._start(server_certificate, start_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API over HTTP."""
        return self.base_url + CCOMPAT_PATH

    @property
    def https_url(self) -> str:
        if self.https_port is None:
            raise ValueError("this registry was started without tls")
        return f"https://{HOST}:{self.https_port}{CCOMPAT_PATH}"

    def _settings(self, server_certificate: tuple[str, str] | None) -> dict:
        settings = {
            "quarkus.http.host": HOST,
            "quarkus.http.port": str(self.port),
            # the management interface (health, metrics) is built in; it cannot be switched
            # off at run time, so it is kept on 127.0.0.1 and a free port
            "quarkus.management.host": HOST,
            "quarkus.management.port": str(self.management_port),
            "quarkus.log.level": "WARN",
        }
        if server_certificate is not None:
            certificate, key = server_certificate
            settings.update(
                {
                    "quarkus.http.ssl-port": str(self.https_port),
                    "quarkus.http.ssl.certificate.files": certificate,
                    "quarkus.http.ssl.certificate.key-files": key,
                }
            )
        if self.basic_auth is not None:
            user, _, secret = self.basic_auth.partition(":")
            settings.update(
                {
                    # Quarkus's own basic auth over an embedded user list (the app ships the
                    # properties-file realm); Apicurio's authn (OIDC) stays off
                    "quarkus.http.auth.basic": "true",
                    "quarkus.security.users.embedded.enabled": "true",
                    "quarkus.security.users.embedded.plain-text": "true",
                    f"quarkus.security.users.embedded.users.{user}": secret,
                    "quarkus.http.auth.permission.everything.paths": "/*",
                    "quarkus.http.auth.permission.everything.policy": "authenticated",
                }
            )
        return settings

    def _start(self, server_certificate, start_timeout: float) -> None:
        started = time.monotonic()
        home = install()
        command = [
            java_executable(),
            *JVM_OPTIONS,
            *(f"-D{key}={value}" for key, value in self._settings(server_certificate).items()),
            "-jar",
            str(home / "quarkus-run.jar"),
        ]
        # Quarkus may write files next to itself: its own folder as the working directory
        self._guard, pid = start_guarded(
            command, self.log_path, self.owner_pid, 5, env=jvm_environment(), cwd=self.directory
        )
        if pid is None:
            raise RegistryStartError("the guard did not start Apicurio's JVM")
        self.java_pid = pid
        self._wait_ready(start_timeout)
        self.start_seconds = time.monotonic() - started

    def _wait_ready(self, timeout: float) -> None:
        """Until the Confluent-compatible API answers (a 401 of the basic-auth variant
        counts: the server is up)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            if not _pid_alive(self.java_pid):
                raise RegistryStartError(f"Apicurio exited during start-up:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/schemas/types", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and self.basic_auth is not None:
                    return
                last = exc
            except OSError as exc:  # refused while starting
                last = exc
            if time.monotonic() > deadline:
                raise RegistryStartError(
                    f"Apicurio not ready after {timeout:.0f} s: {last!r}\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def is_alive(self) -> bool:
        return _pid_alive(self.java_pid)

    def rss_bytes(self) -> int:
        """Resident memory of the JVM (from /proc)."""
        if self.java_pid is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            return procfs.rss_bytes(self.java_pid)
        return 0

    def log_tail(self, lines: int = 40) -> str:
        return _log_tail(self.log_path, lines)

    def client_context(self) -> ssl.SSLContext:
        """A TLS context trusting this registry's private CA (for urllib)."""
        if self.tls is None:
            raise ValueError("this registry was started without tls")
        return ssl.create_default_context(cafile=self.tls.ca)

    def stop(self) -> None:
        if not self.owned:
            return
        if self.java_pid and _pid_alive(self.java_pid):
            os.kill(self.java_pid, signal.SIGKILL)  # in-memory storage: nothing to keep
        deadline = time.monotonic() + 10
        while _pid_alive(self.java_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._guard is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._guard.wait(10)
            self._guard = None
        if not os.environ.get("KAFKA_DS_KEEP_BROKER_LOGS"):
            shutil.rmtree(self.directory, ignore_errors=True)

    # -- shared by pytest-xdist workers

    def state(self) -> dict:
        return {
            "kind": "apicurio",
            "version": VERSION,
            "directory": self.directory,
            "java_pid": self.java_pid,
            "port": self.port,
            "management_port": self.management_port,
            "start_seconds": round(self.start_seconds, 1),
        }

    @classmethod
    def attach(cls, state: dict) -> Apicurio:
        """A handle on a registry another process started (that one stops it)."""
        registry = cls.__new__(cls)
        registry.tls = None
        registry.basic_auth = None
        registry.owner_pid = 0
        registry.directory = state["directory"]
        registry.log_path = os.path.join(registry.directory, "stdout.log")
        registry.port = state["port"]
        registry.management_port = state["management_port"]
        registry.https_port = None
        registry.java_pid = state["java_pid"]
        registry.start_seconds = state["start_seconds"]
        registry.owned = False
        registry._guard = None
        return registry


def shared_registry(state_dir: str, owner_pid: int) -> Apicurio:
    """The run's one plain-HTTP Apicurio: started by the first process that asks (under a
    file lock), attached to by the others; pytest's main process kills it at the end
    (``apache_kafka.stop_shared``, which reads the same state folder)."""
    state_path = Path(state_dir) / "apicurio.json"
    with _locked(Path(state_dir) / "apicurio.lock"):
        if state_path.exists():
            state = json.loads(state_path.read_text())
            if "error" in state:
                raise RegistryStartError(f"Apicurio failed to start earlier: {state['error']}")
            return Apicurio.attach(state)
        try:
            registry = Apicurio(owner_pid=owner_pid)
        except Exception as e:
            state_path.write_text(json.dumps({"error": str(e)[:2000]}))
            raise
        registry.owned = False  # the main process stops it
        state_path.write_text(json.dumps(registry.state()))
        return registry


@pytest.fixture(scope="session")
def apicurio_registry() -> Apicurio:
    """The run's Apicurio (plain HTTP, in-memory storage), shared by all workers; import it
    into a test module as the fake's fixtures are. Tests share it: use fresh subject names.
    Outside a pytest run of the suite's conftest (no shared state folder) this process
    starts its own, stopped when the process exits (its guard watches this process)."""
    state_dir = os.environ.get("KAFKA_DS_SHARED_STATE")
    if state_dir:
        return shared_registry(state_dir, int(os.environ["KAFKA_DS_SHARED_OWNER"]))
    return Apicurio()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.apicurio",
        description=f"Start Apicurio Registry {VERSION} (in-memory storage) on 127.0.0.1 "
        "from Maven Central; print its URLs; run until Ctrl-C or SIGTERM.",
    )
    parser.add_argument(
        "--tls",
        metavar="DIR",
        help="also serve HTTPS with a certificate of a new private CA, written to DIR "
        "(ca.pem is what schema.registry.ssl.ca.location takes)",
    )
    parser.add_argument(
        "--basic-auth", metavar="USER:SECRET", help="require HTTP basic auth on every request"
    )
    args = parser.parse_args(argv)
    if args.basic_auth is not None and ":" not in args.basic_auth:
        parser.error("--basic-auth takes USER:SECRET")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tls = certificate = None
    if args.tls:
        tls, certificate = server_tls(Path(args.tls))
    registry = Apicurio(tls=tls, server_certificate=certificate, basic_auth=args.basic_auth)
    try:
        print(f"apicurio={registry.base_url}", flush=True)
        print(f"schema.registry.url={registry.url}", flush=True)
        if tls is not None:
            print(f"schema.registry.url={registry.https_url}", flush=True)
            print(f"schema.registry.ssl.ca.location={tls.ca}", flush=True)
        print(
            f"Apicurio Registry {VERSION} started in {registry.start_seconds:.1f} s, "
            f"{registry.rss_bytes() / 2**20:.0f} MiB resident; Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.5):
            if not registry.is_alive():
                print("Apicurio exited:\n" + registry.log_tail(), file=sys.stderr)
                return 1
    finally:
        registry.stop()
    return 0


def server_tls(directory: Path) -> tuple[TlsFiles, tuple[str, str]]:
    """A private CA (``trustme``) and a certificate for 127.0.0.1 written to ``directory``:
    the client's files (CA, and a client certificate the CA signed) and the server's
    (certificate, key)."""
    from tests.support.registry_tls import make_tls

    directory.mkdir(parents=True, exist_ok=True)
    files, _ = make_tls(directory, require_client_cert=False)
    authority = files.authority
    server = authority.issue_cert("127.0.0.1", "localhost")  # type: ignore[attr-defined]
    certificate, key = directory / "server.pem", directory / "server.key"
    server.cert_chain_pems[0].write_to_path(str(certificate))
    server.private_key_pem.write_to_path(str(key))
    return files, (str(certificate), str(key))


if __name__ == "__main__":
    sys.exit(main())
