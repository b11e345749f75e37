"""Record-batch decode throughput: kafka_ds (numpy/Arrow, column-wise) vs aiokafka (Cython).

    python benchmarks/bench_decode.py                 # 1M records per codec
    python benchmarks/bench_decode.py --records 200000

Builds N records (100-byte JSON-ish values, 10-byte keys, ~500 records per
batch) for each codec, groups the batches into "fetch responses" of 1-8 MB
(concatenated batches, what one partition's ``records`` field holds), then
times, best of 3 after a warm-up pass, on one core (pinned with
sched_setaffinity where available):

* kafka_ds: ``decode_records`` over every blob -> one Arrow RecordBatch each;
* aiokafka: ``MemoryRecords`` + Cython ``DefaultRecordBatch`` iterating every
  record and touching key, value, offset and timestamp.

Also times batch encoding (kafka_ds ``encode_record_batch`` vs aiokafka's
Cython ``DefaultRecordBatchBuilder``), uncompressed.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pyarrow as pa  # noqa: E402

from kafka_ds.protocol.compression import codec_id  # noqa: E402
from kafka_ds.protocol.records import decode_records, encode_record_batch  # noqa: E402

TS0 = 1_700_000_000_000
STATUSES = ("new", "paid", "shipped", "cancelled", "returned")


def make_records(n: int, seed: int = 1):
    rnd = random.Random(seed)
    keys = [b"key-%06d" % (i % 1_000_000) for i in range(n)]          # 10 bytes
    values = []
    for i in range(n):
        v = (b'{"id":%d,"user":"u%05d","amount":%d.%02d,"status":"%s","sku":"%s"}'
             % (i, rnd.randrange(100_000), rnd.randrange(10_000), rnd.randrange(100),
                rnd.choice(STATUSES).encode(), os.urandom(8).hex().encode()))
        values.append(v.ljust(100, b" ")[:100])                            # 100 bytes
    ts = [TS0 + i // 10 for i in range(n)]                                 # ~10 records/ms
    return keys, values, ts


def build_blobs(keys, values, ts, codec: int, per_batch: int = 500, seed: int = 2):
    """Batches of ``per_batch`` records grouped into 1-8 MB fetch blobs."""
    rnd = random.Random(seed)
    k = pa.array(keys, pa.binary())
    v = pa.array(values, pa.binary())
    t = pa.array(ts, pa.int64())
    batches = []
    for start in range(0, len(keys), per_batch):
        end = min(start + per_batch, len(keys))
        batches.append(encode_record_batch(
            keys=k.slice(start, end - start), values=v.slice(start, end - start),
            timestamps_ms=t.slice(start, end - start), base_offset=start, compression=codec))
    blobs = []
    current = []
    size = 0
    target = rnd.uniform(1, 8) * 1e6
    for b in batches:
        current.append(b)
        size += len(b)
        if size >= target:
            blobs.append(b"".join(current))
            current, size, target = [], 0, rnd.uniform(1, 8) * 1e6
    if current:
        blobs.append(b"".join(current))
    return blobs


def run_ours(blobs):
    n = 0
    for blob in blobs:
        r = decode_records(blob, topic="bench", partition=0, fetch_offset=0)
        n += r.record_count
    return n


def run_aiokafka(blobs):
    from aiokafka.record.memory_records import MemoryRecords
    n = 0
    for blob in blobs:
        mr = MemoryRecords(blob)
        while True:
            batch = mr.next_batch()
            if batch is None:
                break
            for r in batch:
                r.key
                r.value
                r.offset
                r.timestamp
                n += 1
    return n


def best_of(fn, arg, repeat=3):
    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(arg)
        best = min(best, time.perf_counter() - t0)
    return best, result


def bench_encode(keys, values, ts, per_batch=500, repeat=3):
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    n = len(keys)
    k = pa.array(keys, pa.binary())
    v = pa.array(values, pa.binary())
    t = pa.array(ts, pa.int64())
    slices = [(s, min(s + per_batch, n)) for s in range(0, n, per_batch)]

    def ours(_):
        for s, e in slices:
            encode_record_batch(keys=k.slice(s, e - s), values=v.slice(s, e - s),
                                timestamps_ms=t.slice(s, e - s), base_offset=s)

    def theirs(_):
        for s, e in slices:
            b = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
            for i in range(s, e):
                b.append(i - s, ts[i], keys[i], values[i], [])
            b.build()

    ours(None)                                # warm-up
    theirs(None)
    t_ours, _ = best_of(ours, None, repeat)
    t_theirs, _ = best_of(theirs, None, repeat)
    return n / t_ours, n / t_theirs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="records per codec (default 1M)")
    ap.add_argument("--codecs", default="none,lz4,zstd", help="comma separated codec names")
    ap.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    ap.add_argument("--no-encode", action="store_true", help="skip the encode benchmark")
    args = ap.parse_args(argv)

    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})   # one core
        except OSError:
            pass
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)

    print(f"building {args.records:,} records (100-byte values, 10-byte keys, 500/batch) ...",
          flush=True)
    keys, values, ts = make_records(args.records)
    rows = []
    for name in args.codecs.split(","):
        codec = codec_id(name)
        blobs = build_blobs(keys, values, ts, codec)
        total_bytes = sum(len(b) for b in blobs)
        assert run_ours(blobs[:1]) == run_aiokafka(blobs[:1])
        run_ours(blobs)                       # warm-up (page faults, caches)
        run_aiokafka(blobs)
        t_ours, n_ours = best_of(run_ours, blobs, args.repeat)
        t_aio, n_aio = best_of(run_aiokafka, blobs, args.repeat)
        assert n_ours == n_aio == args.records, (n_ours, n_aio)
        rows.append((name, len(blobs), total_bytes / len(blobs) / 1e6,
                     n_ours / t_ours, n_aio / t_aio))
        print(f"  {name}: done", flush=True)

    print()
    print(f"decode, {args.records:,} records per codec, best of {args.repeat}, one core")
    print(f"{'codec':<6} {'blobs':>5} {'avg MB':>7} {'kafka_ds rec/s':>15} "
          f"{'aiokafka rec/s':>15} {'ratio':>6}")
    for name, nblobs, avg_mb, ours, theirs in rows:
        print(f"{name:<6} {nblobs:>5} {avg_mb:>7.2f} {ours:>15,.0f} {theirs:>15,.0f} "
              f"{ours / theirs:>5.2f}x")
    if not args.no_encode:
        ours, theirs = bench_encode(keys, values, ts, repeat=args.repeat)
        print()
        print("encode (uncompressed, 500 records/batch)")
        print(f"{'':<6} {'':>5} {'':>7} {'kafka_ds rec/s':>15} {'aiokafka rec/s':>15} {'ratio':>6}")
        print(f"{'none':<6} {'':>5} {'':>7} {ours:>15,.0f} {theirs:>15,.0f} {ours / theirs:>5.2f}x")


if __name__ == "__main__":
    main()
