"""Executor memory: peak RSS of ``read_range`` over a ~2 GB partition vs the fetch size.

    python benchmarks/bench_memory.py                 # ~2 GB, 1 KiB values
    python benchmarks/bench_memory.py --gb 0.5        # quick run
    python benchmarks/bench_memory.py --gb 0.5 --record-mib 16 --fetch-kib 1
                                                      # records larger than the fetch size

Fills one partition of a Tansu broker (memory storage: no per-partition size
cap) with ``--gb`` GB of records (1 KiB values, 10-byte keys, 1,000 records per
v2 batch, encoded by ``encode_record_batch`` and produced with kafka_ds's own
``KafkaClient``, a few Produce requests in flight), then, in a fresh Python
subprocess (so nothing of the fill is in its heap), runs
``kafka_ds.read.ranges.read_range`` over the whole range exactly as a Spark task
does and discards every Arrow batch.

The child imports kafka_ds, connects, and decodes one tiny fetch (1 KiB fetch
size: one ~1 MB batch) to load the code paths once (Arrow compute kernels,
codecs, allocator arenas: ~40 MiB of RSS, independent of the data; reported
separately).  It then resets the kernel's peak-RSS counter (``echo 5 >
/proc/self/clear_refs``), reads the whole range, samples ``VmRSS`` after every
batch, and reports the baseline, the peak (``VmHWM``), the peak growth
(response frames, decoded batches, the decoder's reusable buffers, allocator
caches) and the RSS at 25/50/75/100 % of the range.  The growth should be a small multiple of
``kafka.max.partition.fetch.bytes`` (a fetch frame, the Arrow batch decoded
from it and the next frame being received) and must not grow with the range.

``--record-mib N`` fills the partition with records of N MiB instead (one per batch,
after one small record that the warm-up reads) and ``--fetch-kib`` sets the fetch size
below them (KIP-74: each answer then carries one record batch, larger than the limit):
the growth is reported as a multiple of the record, and must not grow with the range
either.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import harness

VALUE_SIZE = 1024
PER_BATCH = 1000


def fill_partition(
    bootstrap: str,
    topic: str,
    total_bytes: int,
    variants: int = 8,
    value_size: int = VALUE_SIZE,
    per_batch: int = PER_BATCH,
    small_first: bool = False,
) -> int:
    """Produce ~``total_bytes`` of value bytes to partition 0; returns the record count
    (``small_first``: one small record first, at offset 0, counted too)."""
    import pyarrow as pa
    from bench_read import acknowledge, send_produce

    from kafka_ds.client import KafkaClient
    from kafka_ds.protocol.records_encode import encode_record_batch

    # A few distinct pre-encoded batches, cycled: the broker assigns the offsets (the
    # batch's base offset is not covered by its CRC), so the same bytes can be re-sent.
    batches = []
    for v in range(variants):
        keys = pa.array([b"key-%06d" % (v * per_batch + i) for i in range(per_batch)])
        values = pa.array(
            [
                (b"%d-%d " % (v, i)).ljust(value_size, b"abcdefgh"[v : v + 1])
                for i in range(per_batch)
            ]
        )
        batches.append(encode_record_batch(keys=keys, values=values))
    count = max(1, total_bytes // (value_size * per_batch))

    client = KafkaClient(bootstrap)
    try:
        conn = client.connection(client.leader_for(topic, 0))
        in_flight = []
        if small_first:
            small = encode_record_batch(keys=None, values=[b"s"])
            acknowledge(conn, send_produce(conn, topic, 0, small))
        for i in range(count):
            in_flight.append((conn, send_produce(conn, topic, 0, batches[i % variants])))
            if len(in_flight) >= 8:
                acknowledge(*in_flight.pop(0))
        for item in in_flight:
            acknowledge(*item)
    finally:
        client.close()
    return count * per_batch + small_first


# --- the child: one executor task reading the whole range ----------------------------------

CHILD = r"""
import json, sys, time

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) * 1024
    return out

import numpy, pyarrow
from kafka_ds.options import parse_read_options
from kafka_ds.client import make_client
from kafka_ds.read.ranges import OffsetRange, read_range

bootstrap, topic, end, fetch_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
start = int(sys.argv[5])
opts = parse_read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                           "kafka.max.partition.fetch.bytes": str(fetch_bytes)}, streaming=False)
import dataclasses
import kafka_ds.protocol.records          # the decode path's imports
client = make_client(opts)
client.leader_for(topic, 0)               # metadata + a connection
imports_rss = status()["VmRSS"]
# Warm-up: one tiny fetch (1 KiB fetch size: the broker returns one batch) and its
# decode load the code paths (Arrow compute kernels, codecs, allocator arenas) once.
tiny = dataclasses.replace(opts, max_partition_fetch_bytes=1024)
for batch in read_range(tiny, OffsetRange(topic, 0, 0, 1), client):
    pass
del batch
warm_rss = status()["VmRSS"]
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")           # reset VmHWM to the current RSS
    reset = True
except OSError:
    reset = False
base = status()["VmRSS"]
samples = []
rows = value_bytes = batches = 0
started = time.perf_counter()
peak_sampled = base
for batch in read_range(opts, OffsetRange(topic, 0, start, end), client):
    rows += batch.num_rows
    value_bytes += batch.column(1).nbytes
    batches += 1
    rss = status()["VmRSS"]
    peak_sampled = max(peak_sampled, rss)
    samples.append((rows, rss))
    del batch
elapsed = time.perf_counter() - started
client.close()
final = status()
marks = {}
for q in (25, 50, 75, 100):
    target = (end - start) * q // 100
    for r, rss in samples:
        if r >= target:
            marks[q] = rss
            break
print(json.dumps({"rows": rows, "batches": batches, "value_bytes": value_bytes,
                  "imports_rss": imports_rss, "warm_rss": warm_rss,
                  "seconds": elapsed, "base_rss": base,
                  "peak_rss": final["VmHWM"] if reset else peak_sampled,
                  "peak_sampled": peak_sampled, "hwm_reset": reset,
                  "rss_at": marks, "final_rss": final["VmRSS"]}))
"""


def measure(bootstrap: str, topic: str, end: int, fetch_bytes: int, start: int = 0) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, bootstrap, topic, str(end), str(fetch_bytes), str(start)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(gb: float = 2.0, fetch_bytes: int = 8 << 20, log=print, record_bytes: int = 0) -> dict:
    """Fill a Tansu partition with ``gb`` GB and measure one read of it; returns the figures
    (``record_bytes``: records of that size, one per batch, after one small record)."""
    from tests.support.brokers import TansuBroker

    broker = TansuBroker()
    try:
        topic = "bench_memory"
        broker.create_topic(topic, partitions=1)
        started = time.perf_counter()
        value_size = record_bytes or VALUE_SIZE
        records = fill_partition(
            broker.bootstrap_servers,
            topic,
            int(gb * 1e9),
            variants=2 if record_bytes else 8,
            value_size=value_size,
            per_batch=1 if record_bytes else PER_BATCH,
            small_first=bool(record_bytes),
        )
        log(
            f"filled {topic}: {records:,} records x {value_size} B "
            f"({records * value_size / 1e9:.2f} GB of values) in "
            f"{time.perf_counter() - started:.1f}s"
        )
        start = 1 if record_bytes else 0
        result = measure(broker.bootstrap_servers, topic, records, fetch_bytes, start)
    finally:
        broker.stop()
    assert result["rows"] == records - start, (result["rows"], records)
    result["records"] = records - start
    result["fetch_bytes"] = fetch_bytes
    result["record_bytes"] = record_bytes
    result["growth"] = result["peak_rss"] - result["base_rss"]
    return result


def report(r: dict) -> str:
    mib = 1 << 20
    lines = [
        f"read_range over {r['records']:,} records ({r['value_bytes'] / 1e9:.2f} GB of values, "
        f"{r['batches']} batches) in {r['seconds']:.1f}s "
        f"({r['value_bytes'] / r['seconds'] / 1e9:.2f} GB/s incl. fetch)",
        f"fetch size (kafka.max.partition.fetch.bytes): {r['fetch_bytes']:,} bytes"
        + (
            f"; records of {r['record_bytes']:,} bytes, one per batch"
            if r.get("record_bytes")
            else ""
        ),
        f"one-time code/allocator warm-up (first tiny fetch + decode): "
        f"{(r['warm_rss'] - r['imports_rss']) / mib:.0f} MiB (not counted below)",
        f"baseline RSS {r['base_rss'] / mib:.0f} MiB, peak RSS {r['peak_rss'] / mib:.0f} MiB "
        f"-> growth {r['growth'] / mib:.1f} MiB = {r['growth'] / r['fetch_bytes']:.2f} x fetch size"
        + (
            f" = {r['growth'] / r['record_bytes']:.2f} x record size"
            if r.get("record_bytes")
            else ""
        ),
        "RSS at "
        + ", ".join(
            f"{q}%: {v / mib:.0f} MiB"
            for q, v in sorted(r["rss_at"].items(), key=lambda kv: int(kv[0]))
        ),
    ]
    return "\n".join(lines)


def main(argv=None):
    ap = harness.parser(__doc__)
    ap.add_argument("--gb", type=float, default=2.0, help="GB of values to fill (default 2)")
    ap.add_argument(
        "--fetch-mib",
        type=int,
        default=8,
        help="kafka.max.partition.fetch.bytes in MiB (default 8)",
    )
    ap.add_argument(
        "--fetch-kib",
        type=int,
        default=0,
        help="kafka.max.partition.fetch.bytes in KiB (instead of --fetch-mib)",
    )
    ap.add_argument(
        "--record-mib",
        type=int,
        default=0,
        help="records of this many MiB, one per batch (default: 1 KiB records, 1,000 per batch)",
    )
    args = ap.parse_args(argv)
    fetch_bytes = args.fetch_kib << 10 if args.fetch_kib else args.fetch_mib << 20
    r = run(
        args.gb,
        fetch_bytes,
        log=lambda s: print(s, file=sys.stderr),
        record_bytes=args.record_mib << 20,
    )
    print(report(r))


if __name__ == "__main__":
    main()
