"""benchmarks/jvm_report.py: the targets of issue #39 read from bench_jvm.py's figures
(throughput higher is better, latency lower; the connector's figure for a byte-limit-off
write is its plain write's; Spark's own cost as a multiple), and the chart it draws."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import jvm_report as jr  # noqa: E402

OFF = jr.BYTE_LIMIT_OFF


def figures():
    return {
        "records": 1000,
        "rates": [1000],
        "reads": {"count": {jr.PYKAFKA: 3.0e6, jr.TUNED: 2.0e6, jr.CEILING: 4.0e6}},
        "writes": {
            "write, binary": {jr.PYKAFKA: 1.4e6, jr.TUNED: 1.0e6, jr.CEILING: 5.0e6},
            "write, Avro": {jr.PYKAFKA: 0.9e6, jr.TUNED: 1.0e6},
            "write, Avro" + OFF: {jr.PYKAFKA: 1.3e6},
        },
        "stream": {
            "1000": {
                jr.PYKAFKA: {"latency_ms": {"p50": 200.0, "p99": 300.0}},
                jr.TUNED: {
                    "latency_ms": {"p50": 100.0, "p99": 280.0},
                    "triggers": {"triggerExecution": 100},
                },
            }
        },
        "floor": {jr.FLOOR_QUERY: {"triggerExecution": 150}},
    }


def test_targets_compare_with_the_tuned_connector_each_in_its_direction():
    rows = {row["what"]: row for row in jr.targets(figures())}
    read = rows["read, `count()`"]
    assert read["ratio"] == pytest.approx(1.5) and read["met"] is True
    assert read["ceiling_ratio"] == pytest.approx(2.0)
    binary = rows["binary write"]
    assert binary["ratio"] == pytest.approx(1.4) and binary["met"] is False
    avro_off = [r for w, r in rows.items() if w.startswith("Avro write, `spark")][0]
    assert avro_off["tuned"] == 1.0e6  # the connector's plain write: no rows reach Python
    assert avro_off["ratio"] == pytest.approx(1.3) and avro_off["met"] is True
    assert rows["Avro write at Spark's defaults"]["met"] is False
    p50, p99 = rows["streaming p50 at 1,000 records/s"], rows["streaming p99 at 1,000 records/s"]
    assert p50["ratio"] == pytest.approx(2.0) and p50["met"] is False  # lower is better
    assert p99["ratio"] == pytest.approx(300 / 280) and p99["met"] is True
    assert p50["ceiling_ratio"] == pytest.approx(1.5)  # the floor's trigger over the connector's


def test_a_path_not_measured_says_so():
    data = figures()
    del data["stream"]
    table = jr.targets_table(data)
    assert "| streaming p50 at 1,000 records/s | -- | -- | -- | <= 1.0x | not measured |" in table
    data = figures()
    del data["reads"]["count"][jr.TUNED]
    row = "| read, `count()` | 3.00M | -- | -- | >= 1.5x | not measured |"
    assert row in jr.targets_table(data)


def test_the_chart_is_drawn(tmp_path):
    path = tmp_path / "chart.png"
    jr.draw(figures(), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
