"""Zero-config registration: Spark lists top-level ``pyspark_*`` modules with
``pkgutil.iter_modules()`` in a fresh Python worker and registers their ``DefaultSource``.
Checked here the way Spark does it, from a directory outside the project (so the
project root on sys.path cannot hide an install that Spark would not see)."""

import subprocess
import sys

import pytest

LOOKUP = """
from importlib import import_module
from pkgutil import iter_modules
found = {m.name: import_module(m.name).DefaultSource.name()
         for m in iter_modules() if m.name.startswith("pyspark_")}
print(found.get("pyspark_pykafka"))
"""


def test_installed_package_is_found_like_spark_looks_it_up(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", LOOKUP], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pykafka", (
        "pyspark_pykafka is not visible to pkgutil.iter_modules() outside the project "
        f"directory; Spark would not find format('pykafka'). stderr: {out.stderr}"
    )


@pytest.mark.heavy
@pytest.mark.spark
def test_format_found_without_register_call(tmp_path):
    script = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
try:
    print(spark.read.format("pykafka").load().schema.simpleString())
finally:
    spark.stop()
"""
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith(
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    ), out.stdout
