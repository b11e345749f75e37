"""The smoke set (tests/support/smoke_job.py: registration with no register call, batch write,
batch read, streaming restart from a checkpoint; before 4.2, the refusal of admission
control) on the other pyspark minor releases with the Python Data Source API (4.2's runs
the parity test instead); the full suite runs on the pyspark of the test venv.

Each release gets a venv under ``.venv-spark/<version>`` (tests/support/spark_venvs.py,
kept, so a second run in the same checkout installs nothing; Spark's own connector in
tests/spark/test_parity_jvm.py runs in the 4.2 one). The installs of all releases run at
once, when the first test of this module needs one. Set ``KAFKA_DS_SPARK_VERSIONS`` (comma
separated, e.g. ``4.0.5``; empty: none) to choose others.
"""

from __future__ import annotations

import os

import pytest

from tests.spark.test_wheel import ROOT, run_smoke
from tests.support import spark_connector
from tests.support import spark_venvs as spark_venvs_

pytestmark = pytest.mark.heavy

# The 4.2 release is not here by default: tests/spark/test_parity_jvm.py runs kafka_ds in
# it through 54 cases (batch and stream reads, writes, checkpoints), and its smoke run cost
# the suite about 40 s of a worker.
DEFAULT_VERSIONS = [r for r in spark_venvs_.RELEASES if not r.startswith("4.2.")]
VERSIONS = [
    v
    for v in os.environ.get("KAFKA_DS_SPARK_VERSIONS", ",".join(DEFAULT_VERSIONS)).split(",")
    if v.strip()
]


@pytest.fixture(scope="module")
def spark_venvs():
    """{version: (python, install_seconds | None, error)}, installing what is missing in
    parallel (tests/support/spark_venvs.py)."""
    return spark_venvs_.install(VERSIONS)


@pytest.mark.spark
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("version", VERSIONS)
def test_smoke_set_on_other_pyspark_releases(spark_venvs, version, kafka_broker, tmp_path):
    python, install_seconds, error = spark_venvs[version]
    assert error is None, f"installing pyspark=={version} failed:\n{error}"
    print(f"pyspark {version}: install {install_seconds} s (None: already installed)")
    topic = kafka_broker.unique_topic(f"v{version.replace('.', '')}")
    kafka_broker.create_topic(topic, partitions=3)
    before_42 = tuple(map(int, version.split(".")[:2])) < (4, 2)
    try:
        seen = run_smoke(
            python,
            kafka_broker.bootstrap_servers,
            topic,
            *(["--admission-control"] if before_42 else []),
            cwd=tmp_path,
            env=spark_connector.child_environment(str(python)),
            timeout=1200,
        )
    finally:
        kafka_broker.delete_topic(topic)
    assert seen["pyspark"] == version and seen["spark"] == version, seen
    assert seen["kafka_ds"] == str(ROOT / "kafka_ds"), seen
    print(f"pyspark {version}: smoke {seen['seconds']}")
    # Spark refuses its default save mode (ErrorIfExists) and Ignore for a Python data
    # source in every release, before kafka_ds is asked (docs/differences.md).
    for mode, spark_name in (("default", "ErrorIfExists"), ("ignore", "Ignore")):
        error = seen["save_mode_errors"][mode] or ""
        assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" in error, seen
        assert f'cannot be written in the "{spark_name}" mode' in error, seen
    if before_42:
        # Admission control (maxOffsetsPerTrigger and its like) needs pyspark >= 4.2: an
        # older one is told so, naming its release, instead of reading without the limit.
        error = seen["admission_control_error"] or ""
        assert "Option 'maxOffsetsPerTrigger' (admission control) needs pyspark >= 4.2" in error, (
            seen
        )
        assert f"this is pyspark {version}" in error, seen
