"""The soak's checks at the end: the file sink and the sink topic hold every acknowledged
record exactly once, no transaction is left open."""

from __future__ import annotations

import collections
import json
import os
import time
import traceback

# --- the checks at the end -----------------------------------------------------------------


def file_sink_rows(file_sink):
    """(partition, offset) of every row in the files the sink's _spark_metadata committed."""
    import urllib.parse

    import pyarrow.parquet as pq

    log_dir = os.path.join(file_sink, "_spark_metadata")
    files = set()
    for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
        if name.startswith("."):
            continue
        with open(os.path.join(log_dir, name)) as fh:
            for line in fh.read().splitlines()[1:]:
                entry = json.loads(line)
                if entry.get("action", "add") == "add":
                    files.add(urllib.parse.unquote(urllib.parse.urlparse(entry["path"]).path))
    out = []
    for path in sorted(files):
        table = pq.read_table(path, columns=["partition", "offset", "id"])
        out += zip(
            table.column("partition").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("id").to_pylist(),
            strict=True,
        )
    return out, len(files)


def resolve_without_offset(file_sink, acked, without_offset) -> dict:
    """Add to ``acked`` the records delivered without an offset (id -> partition), at the
    (partition, offset) of the file sink's row with that id; what it found."""
    found: dict = collections.defaultdict(set)
    if without_offset:
        rows, _ = file_sink_rows(file_sink)
        for p, o, i in rows:
            if without_offset.get(i) == p:
                found[i].add((p, o))
    for i, places in found.items():
        for place in places:
            acked[place] = i
    return {
        "delivered_without_offset": len(without_offset),
        "found_in_the_file_sink": len(found),
        "found_at_more_than_one_offset": sum(len(v) > 1 for v in found.values()),
    }


def check_file_sink(file_sink, acked) -> dict:
    """Every acknowledged (partition, offset) once in the committed files, ids matching."""
    try:
        rows, files = file_sink_rows(file_sink)
        counts = collections.Counter((p, o) for p, o, _ in rows)
        return {
            "files": files,
            "rows": len(rows),
            "lost": len(set(acked) - set(counts)),
            "duplicated": sum(n - 1 for n in counts.values() if n > 1),
            "unexpected": len(set(counts) - set(acked)),
            "value_mismatch": sum(1 for p, o, i in rows if acked.get((p, o), i) != i),
        }
    except Exception:  # noqa: BLE001 - the summary and the plot are still written
        return {"check_failed": traceback.format_exc()}


def check_kafka_sink(bootstrap, registry_url, sink, partitions, acked):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kafka_ds.client import KafkaClient
    from kafka_ds.client.reads import fetch_watermarks
    from tests.support.txlog import verdict

    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    ctx = SerializationContext(sink, MessageField.VALUE)
    result = {}

    def tally(values):
        counts = collections.Counter()
        wrong_id = with_unit = 0
        for raw in values:
            record = deserialize(raw, ctx)
            key = (record["src_partition"], record["src_offset"])
            counts[key] += 1
            if key in acked and acked[key] != record["id"]:
                wrong_id += 1
            with_unit += record.get("unit") is not None
        return counts, wrong_id, with_unit

    # commit markers reach the partitions after EndTxn returned: wait (2 min at most) until
    # every partition's last stable offset is its high watermark before reading committed
    started = time.monotonic()
    while True:
        client = KafkaClient(bootstrap)
        try:
            marks = fetch_watermarks(
                client, {(sink, p): 0 for p in range(partitions)}, isolation_level=1
            )
        finally:
            client.close()
        lso = {p: marks[(sink, p)][:2] for p in range(partitions)}
        if all(hw == ls for hw, ls in lso.values()) or time.monotonic() - started > 120:
            break
        time.sleep(1)
    result["waited_for_stable_s"] = round(time.monotonic() - started, 1)
    log_verdict = verdict(bootstrap, sink)
    counts, wrong_id, with_unit = tally(log_verdict.committed)
    aborted_keys = set(tally(log_verdict.aborted)[0])
    result["raw_log"] = {
        "committed_records": sum(counts.values()),
        "lost": len(set(acked) - set(counts)),
        "lost_by_source_partition": dict(
            collections.Counter(p for p, _ in set(acked) - set(counts))
        ),
        "duplicated": sum(n - 1 for n in counts.values() if n > 1),
        "unexpected": len(set(counts) - set(acked)),
        "value_mismatch": wrong_id,
        "raw_log_first_offset_by_partition": {
            str(p): min(
                (b.base_offset for b in log_verdict.batches if b.partition == p), default=None
            )
            for p in range(partitions)
        },
        "records_with_v2_field_set": with_unit,
        "aborted_records": len(log_verdict.aborted),
        "open_records": len(log_verdict.open),
        "commit_markers": log_verdict.commits,
    }
    result["last_stable_offset"] = {
        "partitions_lso_below_hw": {
            str(p): {"hw": hw, "lso": ls} for p, (hw, ls) in lso.items() if ls != hw
        }
    }
    # an independent read_committed reader
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"soak-check-{os.getpid()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    try:
        highs = {
            p: consumer.get_watermark_offsets(TopicPartition(sink, p), timeout=30)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(sink, p, 0) for p in range(partitions)])
        values, position = [], {p: 0 for p in range(partitions)}
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 30:
            msgs = consumer.consume(1000, 1.0)
            got = False
            for msg in msgs:
                if msg.error():
                    continue
                got = True
                values.append(msg.value())
                position[msg.partition()] = msg.offset() + 1
            if got:
                idle_since = time.monotonic()
            if all(position[p] >= highs[p] - 1 for p in range(partitions)):
                # the last offset of a partition is a commit marker, never returned
                pass
    finally:
        consumer.close()
    rc_counts, rc_wrong, _ = tally(values)
    extra = {k: n for k, n in rc_counts.items() if n > counts.get(k, 0)}
    result["read_committed_consumer"] = {
        "records": sum(rc_counts.values()),
        "lost": len(set(acked) - set(rc_counts)),
        "duplicated": sum(n - 1 for n in rc_counts.values() if n > 1),
        "duplicates_that_are_aborted_in_the_raw_log": sum(
            n - counts.get(k, 0) for k, n in extra.items() if k in aborted_keys
        ),
        "last_offset_read_vs_high_watermark": {
            str(p): [position[p], highs[p]] for p in range(partitions)
        },
    }
    return result
