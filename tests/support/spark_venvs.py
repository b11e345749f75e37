"""Other pyspark releases in venvs of their own: ``.venv-spark/<version>``.

The version tests (tests/spark/test_spark_versions.py) run the smoke set on each of
:data:`RELEASES`; Spark's own connector (tests/support/spark_connector.py) runs in the
release of its minor line from the same list, so one install serves both. Each venv gets
pyspark from the package index through uv (no dependencies, not byte-compiled) and a
``.pth`` line with the test venv's packages and this checkout, so the code under test is
the checkout.
Installs are kept for later runs, and each runs under a file lock of its own: two pytest
workers that need the same release install it once.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from tests.support.apache_kafka import _locked

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HOME = PROJECT_ROOT / ".venv-spark"

# The latest patch of each other minor release with the Python Data Source API (the test
# venv has 4.3).
RELEASES = ("4.0.5", "4.1.4", "4.2.1")


def release_for(version: str) -> str:
    """The release of :data:`RELEASES` in ``version``'s minor line (a patch release keeps
    the interfaces a connector built for another patch uses), else ``version`` itself."""
    minor = version.split(".")[:2]
    return next((r for r in RELEASES if r.split(".")[:2] == minor), version)


def _uv() -> str:
    """The test venv's ``uv`` (the test extra and the README's command install it)."""
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        raise FileNotFoundError(
            f"no uv beside {sys.executable}: install the test extra (pip install -e '.[test]')"
        )
    return str(uv)


def _venv(version: str) -> tuple[Path, Path]:
    venv = HOME / version
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
        )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout.strip()
    )
    return python, site


def install(versions) -> dict:
    """``{version: (python, install_seconds | None, error | None)}``: each missing release
    installed, all at once (``None`` seconds: it was there already)."""
    versions = sorted(set(versions))
    result: dict = {}
    with contextlib.ExitStack() as locks:
        for version in versions:  # in one order everywhere: no deadlock between workers
            locks.enter_context(_locked(HOME / f"{version}.lock"))
        running = {}
        for version in versions:
            python, site = _venv(version)
            if (site / f"pyspark-{version}.dist-info").exists():
                result[version] = (python, None, None)
                continue
            # uv, not pip: pyspark comes as a 430-460 MB sdist that the installer builds into
            # a wheel; on a new machine pip took 95 s a release, uv 22 s, and uv's cache
            # links a built release into place in a second or two (uv leaves pyspark's
            # thousands of modules uncompiled: the smoke set imports few of them)
            command = [_uv(), "pip", "install", "--no-deps", "-q", "--python", sys.executable]
            command += ["--target", str(site), f"pyspark=={version}"]
            process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            running[version] = (python, time.monotonic(), process)
        for version, (python, began, process) in running.items():
            out, _ = process.communicate(timeout=1800)
            error = None if process.returncode == 0 else out[-3000:]
            result[version] = (python, round(time.monotonic() - began, 1), error)
        for version in versions:
            _python, site = _venv(version)
            # The test venv's packages after this venv's own pyspark, and this checkout.
            Path(site, "kafka-ds-tests.pth").write_text(
                sysconfig.get_paths()["purelib"] + "\n" + str(PROJECT_ROOT) + "\n"
            )
    return result
