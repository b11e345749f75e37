"""examples/pipelines: the Spark Declarative Pipeline runs with ``spark-pipelines run --spec``
against Tansu and writes exactly the transformed input records to the output topic.

The example folder is copied, and the copy's spec gets this run's storage folder, broker
and topics (its ``storage`` and ``configuration`` entries, nothing else), so the test runs
the example's definitions file unchanged.

Records are produced with confluent-kafka and read back with confluent-kafka, so neither end
of the check is kafka_ds. ``spark-pipelines`` is the CLI of the pyspark of this test's Python
(its bin folder), run with ``PYSPARK_PYTHON`` set to that Python, which has kafka_ds installed:
the Spark Connect server that ``spark-pipelines`` starts runs the source and the sink in its
Python workers."""

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.spark.test_wheel import clean_env
from tests.support.brokers import consume_confluent, produce_confluent

pytestmark = [pytest.mark.heavy, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pipelines"


def copy_example(to: Path, storage: Path, settings: dict) -> Path:
    """Copy of the example whose spec has ``storage`` and ``settings``; the spec's path."""
    import yaml

    shutil.copytree(EXAMPLE, to, ignore=shutil.ignore_patterns("__pycache__"))
    spec_path = to / "spark-pipeline.yml"
    spec = yaml.safe_load(spec_path.read_text())
    assert set(settings) == set(spec["configuration"]), spec  # the example's own settings
    spec["storage"] = storage.as_uri()
    spec["configuration"] = settings
    spec_path.write_text(yaml.safe_dump(spec))
    return spec_path


def spark_pipelines_cli() -> Path:
    """``spark-pipelines`` next to this Python (the venv's bin), else pyspark's own copy."""
    beside = Path(sys.executable).parent / "spark-pipelines"
    if beside.exists():
        return beside
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-pipelines"


@pytest.mark.timeout(600)
def test_pipeline_copies_a_topic_upper_cased_through_a_streaming_table(kafka_broker, tmp_path):
    pytest.importorskip(
        "pyspark.pipelines", reason="Spark Declarative Pipelines need pyspark >= 4.1"
    )
    pytest.importorskip("grpc", reason="spark-pipelines runs over Spark Connect (grpcio)")
    source = kafka_broker.unique_topic("sdp_in")
    sink = kafka_broker.unique_topic("sdp_out")
    kafka_broker.create_topic(source, partitions=2)
    kafka_broker.create_topic(sink, partitions=1)
    # Keys repeat and values are mixed case, so a pipeline that dropped, duplicated or did
    # not transform a record, or lost the key, gives a different multiset.
    produced = [
        {"key": f"k{i % 7}", "value": f"Event-{i}-ok", "partition": i % 2} for i in range(60)
    ]
    produce_confluent(kafka_broker.bootstrap_servers, source, produced)

    spec = copy_example(
        tmp_path / "pipeline",
        tmp_path / "storage",
        {
            "kafka_ds.example.bootstrapServers": kafka_broker.bootstrap_servers,
            "kafka_ds.example.inputTopic": source,
            "kafka_ds.example.outputTopic": sink,
        },
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # Strict options: an option the pipeline adds that kafka_ds does not know (SDP names each
    # flow's query, so the sink gets 'queryName') would fail the run instead of warning.
    env = {**clean_env(), "PYSPARK_PYTHON": sys.executable, "KAFKA_DS_STRICT_OPTIONS": "true"}
    try:
        run = subprocess.run(
            [str(spark_pipelines_cli()), "run", "--spec", str(spec)],
            cwd=run_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=540,
        )
        assert run.returncode == 0, (
            f"rc={run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"
        )
        written = consume_confluent(kafka_broker.bootstrap_servers, sink, timeout=20)
    finally:
        for topic in (source, sink):
            kafka_broker.delete_topic(topic)
    expected = Counter((r["key"].encode(), r["value"].upper().encode()) for r in produced)
    assert Counter((m.key, m.value) for m in written) == expected
    assert len(written) == len(produced)
    # The flows' checkpoints are in the spec's storage, the table in the run's warehouse.
    assert any((tmp_path / "storage").iterdir())
    assert (run_dir / "spark-warehouse").is_dir(), list(run_dir.iterdir())
