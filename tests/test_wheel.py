"""The built wheel, not the editable checkout, is what users install: build it, install it
into a fresh virtual environment that sees the test venv's dependencies but not the
project root, and let Spark find ``format("pykafka")`` from it with no register call."""
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import os, sys
import kafka_ds, pyspark_pykafka
assert "{root}" not in kafka_ds.__file__, kafka_ds.__file__
print("module", kafka_ds.__file__)
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
try:
    print("schema", spark.read.format("pykafka").load().schema.simpleString())
finally:
    spark.stop()
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    wheels = list(out.glob("kafka_ds-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_holds_the_packages_and_nothing_of_the_repository(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "kafka_ds/reader.py" in names and "kafka_ds/writer.py" in names
    assert "kafka_ds/protocol/__init__.py" in names
    assert "pyspark_pykafka/__init__.py" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "notebooks/"))]


@pytest.mark.spark
def test_format_found_from_the_installed_wheel(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site, str(wheel)],
        capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    # The test venv's packages (pyspark, pyarrow, ...) as a plain path entry: a path named
    # in a .pth file is added without reading the .pth files inside it, so the editable
    # install of this checkout stays invisible.
    Path(site, "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    run = subprocess.run([str(python), "-c", SCRIPT.format(root=str(ROOT))], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"module {site}" in run.stdout, run.stdout
    assert ("schema struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
            "timestamp:timestamp,timestampType:int>") in run.stdout, run.stdout
