"""One local Spark session for the whole test run (a JVM start costs seconds)."""

import os
import sys

import pytest


def make_spark(app_name="kafka_ds-tests", driver_memory="2g", conf=None):
    """A local[2] session; ``conf``: more Spark settings (e.g. ``spark.jars``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafka_ds

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", driver_memory)
        .config("spark.python.worker.reuse", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kafka_ds.register(spark)
    return spark


@pytest.fixture(scope="session")
def spark():
    # Test modules import this fixture, so pytest may see it once per module; they all
    # share the one getOrCreate() session, which ends with the test process.
    return make_spark()
