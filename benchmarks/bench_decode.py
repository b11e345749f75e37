"""Record-batch decode/encode throughput: kafka_ds (numpy/Arrow, column-wise) vs aiokafka (Cython).

    python benchmarks/bench_decode.py                      # 1M x 100 B records per codec
    python benchmarks/bench_decode.py --records 200000     # quick run
    python benchmarks/bench_decode.py --value-size 1024 --codecs none --records 200000

Builds N records (JSON-like values of ``--value-size`` bytes, 10-byte keys,
timestamps ~10 records/ms, 500 records per v2 batch) for each codec, groups the
batches into "fetch responses" of 1-8 MB (concatenated batches, what one
partition's ``records`` field holds), then times, on one core (pinned with
sched_setaffinity where available), after a warm-up pass, the best of
``--repeat`` for every response (summed over the responses), the two decoders
taking turns response by response:

* kafka_ds: ``decode_records`` on every response -> one Arrow RecordBatch each
  (key, value, offset, timestamp, timestampType);
* aiokafka: ``MemoryRecords`` + the Cython ``DefaultRecordBatch`` reader,
  checking each batch's CRC (``validate_crc()``, as ``AIOKafkaConsumer`` does by
  default: ``check_crcs=True``; kafka_ds always checks) and iterating every
  record, touching key, value, offset and timestamp.

Each response is first copied into a fresh buffer (untimed), the way the
client's ``recv_into`` leaves a Fetch response in memory right before it is
decoded: kafka_ds gets a ``memoryview`` of a ``bytearray`` (what
``KafkaClient.fetch`` returns), aiokafka ``bytes`` (what its protocol parser
gives it).  ``--cold`` decodes the list of pre-built responses in place
instead (each one cold in cache: a harder, less realistic setting).

Also times batch encoding (uncompressed, 500 records per batch):
``encode_record_batch`` vs aiokafka's Cython ``DefaultRecordBatchBuilder``.
"""

from __future__ import annotations

import json
import os
import random
import time

import harness
import pyarrow as pa

from kafka_ds.protocol.compression import codec_id
from kafka_ds.protocol.records import decode_records
from kafka_ds.protocol.records_encode import encode_record_batch

TS0 = 1_700_000_000_000
STATUSES = ("new", "paid", "shipped", "cancelled", "returned")
PER_BATCH = 500


def pin_one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
        except OSError:
            pass
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def make_records(n: int, value_size: int = 100, seed: int = 1):
    """``n`` keys (10 B), JSON-like values of exactly ``value_size`` bytes, timestamps."""
    rnd = random.Random(seed)
    keys = [b"key-%06d" % (i % 1_000_000) for i in range(n)]
    values = []
    for i in range(n):
        v = b'{"id":%d,"user":"u%05d","amount":%d.%02d,"status":"%s","sku":"%s"}' % (
            i,
            rnd.randrange(100_000),
            rnd.randrange(10_000),
            rnd.randrange(100),
            rnd.choice(STATUSES).encode(),
            os.urandom(8).hex().encode(),
        )
        if value_size > len(v):
            # pad with a JSON-ish filler (realistic compressibility), not one repeated byte
            filler = b',"note":"' + os.urandom(value_size // 4).hex().encode()
            v = (v[:-1] + filler)[: value_size - 2] + b'"}'
        values.append(v.ljust(value_size, b" ")[:value_size])
    ts = [TS0 + i // 10 for i in range(n)]
    return keys, values, ts


def build_blobs(keys, values, ts, codec: int, per_batch: int = PER_BATCH, seed: int = 2):
    """Batches of ``per_batch`` records grouped into 1-8 MB fetch responses."""
    rnd = random.Random(seed)
    k = pa.array(keys, pa.binary())
    v = pa.array(values, pa.binary())
    t = pa.array(ts, pa.int64())
    batches = []
    for start in range(0, len(keys), per_batch):
        end = min(start + per_batch, len(keys))
        batches.append(
            encode_record_batch(
                keys=k.slice(start, end - start),
                values=v.slice(start, end - start),
                timestamps_ms=t.slice(start, end - start),
                base_offset=start,
                compression=codec,
            )
        )
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


def decode_ours(data) -> int:
    return decode_records(data, topic="bench", partition=0, fetch_offset=0).record_count


def decode_aiokafka(data) -> int:
    from aiokafka.record.memory_records import MemoryRecords

    n = 0
    mr = MemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():  # what AIOKafkaConsumer does (check_crcs=True)
            raise ValueError("CRC mismatch")
        for r in batch:
            r.key  # noqa: B018 (the peer decodes on access)
            r.value  # noqa: B018 (the peer decodes on access)
            r.offset  # noqa: B018 (the peer decodes on access)
            r.timestamp  # noqa: B018 (the peer decodes on access)
            n += 1
    return n


def timed_pass(fn, blobs, as_bytes: bool):
    """Seconds spent in ``fn`` over all blobs decoded in place (cold), and the records."""
    started = time.perf_counter()
    n = 0
    for blob in blobs:
        n += fn(bytes(blob) if as_bytes else blob)
    return time.perf_counter() - started, n


def hot_interleaved(blobs, repeat: int):
    """Per-response best-of-``repeat`` seconds for kafka_ds and aiokafka, summed.

    Each response is copied into a fresh buffer right before each decode (untimed),
    and the two decoders take turns response by response, so that both see the same
    cache state and the same background noise.
    """
    best_ours = [float("inf")] * len(blobs)
    best_aio = [float("inf")] * len(blobs)
    clock = time.perf_counter
    for _ in range(repeat):
        for i, blob in enumerate(blobs):
            fresh = bytearray(blob)  # "received": in cache, like recv_into
            data = memoryview(fresh)
            started = clock()
            got = decode_ours(data)
            best_ours[i] = min(best_ours[i], clock() - started)
            del data
            fresh = bytes(bytearray(blob))
            started = clock()
            got_aio = decode_aiokafka(fresh)
            best_aio[i] = min(best_aio[i], clock() - started)
            assert got == got_aio, (got, got_aio)
    return sum(best_ours), sum(best_aio)


def decode_bench(keys, values, ts, codec_name: str, repeat: int = 3, hot: bool = True) -> dict:
    """Decode figures for one codec: records/s and value GB/s for kafka_ds and aiokafka."""
    codec = codec_id(codec_name)
    blobs = build_blobs(keys, values, ts, codec)
    n = len(keys)
    value_bytes = sum(len(v) for v in values)
    assert decode_ours(memoryview(blobs[0])) == decode_aiokafka(blobs[0])
    if hot:
        hot_interleaved(blobs, 1)  # warm-up
        t_ours, t_aio = hot_interleaved(blobs, repeat)
    else:
        timed_pass(decode_ours, blobs, False)  # warm-up
        timed_pass(decode_aiokafka, blobs, True)
        t_ours = t_aio = float("inf")
        for _ in range(repeat):
            t, got = timed_pass(decode_ours, blobs, False)
            assert got == n, (got, n)
            t_ours = min(t_ours, t)
            t, got = timed_pass(decode_aiokafka, blobs, True)
            assert got == n, (got, n)
            t_aio = min(t_aio, t)
    return {
        "codec": codec_name,
        "records": n,
        "value_size": len(values[0]),
        "blobs": len(blobs),
        "avg_mb": sum(len(b) for b in blobs) / len(blobs) / 1e6,
        "ours": n / t_ours,
        "aiokafka": n / t_aio,
        "ours_gbs": value_bytes / t_ours / 1e9,
        "aiokafka_gbs": value_bytes / t_aio / 1e9,
    }


def encode_bench(keys, values, ts, per_batch: int = PER_BATCH, repeat: int = 3) -> dict:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    n = len(keys)
    k = pa.array(keys, pa.binary())
    v = pa.array(values, pa.binary())
    t = pa.array(ts, pa.int64())
    slices = [(s, min(s + per_batch, n)) for s in range(0, n, per_batch)]

    def ours():
        for s, e in slices:
            encode_record_batch(
                keys=k.slice(s, e - s),
                values=v.slice(s, e - s),
                timestamps_ms=t.slice(s, e - s),
                base_offset=s,
            )

    def theirs():
        for s, e in slices:
            b = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
            for i in range(s, e):
                b.append(i - s, ts[i], keys[i], values[i], [])
            b.build()

    ours()  # warm-up
    theirs()
    t_ours = t_theirs = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        ours()
        t_ours = min(t_ours, time.perf_counter() - started)
        started = time.perf_counter()
        theirs()
        t_theirs = min(t_theirs, time.perf_counter() - started)
    return {"records": n, "ours": n / t_ours, "aiokafka": n / t_theirs}


def main(argv=None):
    ap = harness.parser(__doc__)
    ap.add_argument("--records", type=int, default=1_000_000, help="records per codec (default 1M)")
    ap.add_argument("--value-size", type=int, default=100, help="value bytes (default 100)")
    ap.add_argument("--codecs", default="none,lz4,zstd", help="comma separated codec names")
    ap.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    ap.add_argument(
        "--cold", action="store_true", help="decode the pre-built responses in place (cold cache)"
    )
    ap.add_argument("--no-encode", action="store_true", help="skip the encode benchmark")
    ap.add_argument("--json", action="store_true", help="print one JSON line (for run_all.py)")
    args = ap.parse_args(argv)

    pin_one_core()
    if not args.json:
        print(
            f"building {args.records:,} records ({args.value_size}-byte values, 10-byte keys, "
            f"{PER_BATCH}/batch) ...",
            flush=True,
        )
    keys, values, ts = make_records(args.records, args.value_size)
    rows = []
    for name in args.codecs.split(","):
        rows.append(decode_bench(keys, values, ts, name, args.repeat, hot=not args.cold))
        if not args.json:
            print(f"  {name}: done", flush=True)
    if args.json:
        e = None if args.no_encode else encode_bench(keys, values, ts, repeat=args.repeat)
        print(json.dumps({"decode": rows, "encode": e}))
        return

    print()
    print(
        f"decode, {args.records:,} records x {args.value_size} B per codec, best of "
        f"{args.repeat}, one core, {'cold' if args.cold else 'hot (as received)'} responses"
    )
    print(
        f"{'codec':<6} {'blobs':>5} {'avg MB':>7} {'kafka_ds rec/s':>15} "
        f"{'aiokafka rec/s':>15} {'ratio':>6} {'kafka_ds GB/s':>14} {'aiokafka GB/s':>14}"
    )
    for r in rows:
        print(
            f"{r['codec']:<6} {r['blobs']:>5} {r['avg_mb']:>7.2f} {r['ours']:>15,.0f} "
            f"{r['aiokafka']:>15,.0f} {r['ours'] / r['aiokafka']:>5.2f}x "
            f"{r['ours_gbs']:>14.2f} {r['aiokafka_gbs']:>14.2f}"
        )
    if not args.no_encode:
        e = encode_bench(keys, values, ts, repeat=args.repeat)
        print()
        print(f"encode (uncompressed, {PER_BATCH} records/batch, {args.value_size} B values)")
        print(f"{'':<6} {'':>5} {'':>7} {'kafka_ds rec/s':>15} {'aiokafka rec/s':>15} {'ratio':>6}")
        print(
            f"{'none':<6} {'':>5} {'':>7} {e['ours']:>15,.0f} {e['aiokafka']:>15,.0f} "
            f"{e['ours'] / e['aiokafka']:>5.2f}x"
        )


if __name__ == "__main__":
    main()
