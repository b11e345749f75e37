"""Where decode time goes: per-stage nanoseconds per record, and a cProfile top list.

    python benchmarks/profile_decode.py                          # 300k x 100 B, none/lz4/zstd
    python benchmarks/profile_decode.py --value-size 1024 --codecs none
    python benchmarks/profile_decode.py --cprofile               # + cProfile's top 20

The same responses as ``bench_decode.py`` (hot, as received) are decoded with
timers wrapped around the decoder's internal stages (the wrappers cost a
fraction of a microsecond per call; the stages are called once per response or
once per batch, so the overhead is well under 1 % of the total):

* ``batch headers + CRC``  -- the per-batch loop in ``decode_records``
  (``struct`` unpack, CRC-32C of each batch, bookkeeping), *without* the CRC
  line, which is shown separately as ``CRC-32C``;
* ``decompress``           -- codec into the reused work buffer;
* ``find record starts``   -- zero-byte scan + speculative chains + proof
  (or the Python walk for large records);
* ``key/value/header copy`` -- the Arrow ``take``s building the binary columns
  (the only copy of the payload);
* ``field decode``         -- everything else in the v2 segment decoder: the
  zigzag varint fields, offsets, timestamps, validation;
* ``Arrow assembly``       -- building the ``RecordBatch`` and the result.

These are *stages of the kernel*; the end-to-end stages (fetch wait, JVM
transfer) are measured by ``profile_read.py``.
"""

from __future__ import annotations

import cProfile
import pstats
import time

import bench_decode as bd
import harness

from kafka_ds.protocol import records, records_layout, records_v2
from kafka_ds.protocol.compression import codec_id

STAGES = [
    ("CRC-32C", "crc"),
    ("batch headers (loop)", "headers"),
    ("decompress", "decompress"),
    ("find record starts", "starts"),
    ("key/value/header copy (Arrow take)", "take"),
    ("field decode (varints, offsets, timestamps)", "fields"),
    ("Arrow assembly + result", "assembly"),
]


class StageTimer:
    """Wraps module-level functions of the ``kafka_ds.protocol.records`` modules with timers."""

    def __init__(self):
        self.acc = {}
        self._saved = []

    def wrap(self, module, name, label):
        original = getattr(module, name)
        acc = self.acc
        clock = time.perf_counter

        def timed(*args, **kwargs):
            started = clock()
            try:
                return original(*args, **kwargs)
            finally:
                acc[label] = acc.get(label, 0.0) + clock() - started

        self._saved.append((module, name, original))
        setattr(module, name, timed)

    def __enter__(self):
        # each function is wrapped where its caller looks it up
        self.wrap(records, "_crc32c", "crc")
        self.wrap(records_v2._comp, "decompress_into", "decompress")
        self.wrap(records_v2, "_find_starts", "starts")
        self.wrap(records_v2, "_take_binary", "take")
        self.wrap(records, "_decode_v2_segment", "segment")
        self.wrap(records, "decode_records", "total")
        return self

    def __exit__(self, *exc):
        for module, name, original in reversed(self._saved):
            setattr(module, name, original)

    def stages(self) -> dict:
        a = self.acc
        seg = a.get("segment", 0.0)
        total = a.get("total", 0.0)
        inner = a.get("decompress", 0.0) + a.get("starts", 0.0) + a.get("take", 0.0)
        return {
            "crc": a.get("crc", 0.0),
            "headers": total - seg - a.get("crc", 0.0),
            "decompress": a.get("decompress", 0.0),
            "starts": a.get("starts", 0.0),
            "take": a.get("take", 0.0),
            "fields": seg - inner,
            "assembly": 0.0,
            "total": total,
        }


def profile_codec(keys, values, ts, codec_name: str, passes: int = 3) -> dict:
    """ns/record per stage (best pass by total) for one codec."""
    blobs = bd.build_blobs(keys, values, ts, codec_id(codec_name))
    n = len(keys)
    best = None
    for p in range(passes + 1):
        with StageTimer() as st:
            for blob in blobs:
                data = memoryview(bytearray(blob))  # hot, as received
                records.decode_records(data, topic="bench", partition=0, fetch_offset=0)
        if p == 0:
            continue  # warm-up
        stages = st.stages()
        if best is None or stages["total"] < best["total"]:
            best = stages
    return {k: v / n * 1e9 for k, v in best.items()}


def assembly_cost(keys, values, ts, codec_name: str) -> float:
    """ns/record of building the output RecordBatch from the decoded columns (timed
    alone on the decoded columns; subtracted from the batch-loop remainder)."""
    import pyarrow as pa

    blobs = bd.build_blobs(keys, values, ts, codec_id(codec_name))
    n = len(keys)
    batches = [
        records.decode_records(
            memoryview(bytearray(b)), topic="bench", partition=0, fetch_offset=0
        ).batch
        for b in blobs
    ]
    schema = records_layout.record_schema(True)
    started = time.perf_counter()
    for _ in range(3):
        for b in batches:
            cols = [b.column(i) for i in range(b.num_columns)]
            pa.RecordBatch.from_arrays(cols, schema=schema)
    return (time.perf_counter() - started) / 3 / n * 1e9


def main(argv=None):
    ap = harness.parser(__doc__)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--codecs", default="none,lz4,zstd")
    ap.add_argument("--cprofile", action="store_true", help="also print cProfile's top 20")
    args = ap.parse_args(argv)

    bd.pin_one_core()
    keys, values, ts = bd.make_records(args.records, args.value_size)
    names = args.codecs.split(",")
    results = {}
    for name in names:
        results[name] = profile_codec(keys, values, ts, name)
        asm = assembly_cost(keys, values, ts, name)
        results[name]["assembly"] = asm
        results[name]["headers"] = max(results[name]["headers"] - asm, 0.0)

    print(
        f"\ndecode stages, ns per record ({args.records:,} records x {args.value_size} B, "
        "one core, hot responses)\n"
    )
    print("| stage | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, key in STAGES:
        print(f"| {label} | " + " | ".join(f"{results[n][key]:.1f}" for n in names) + " |")
    print("| **total** | " + " | ".join(f"**{results[n]['total']:.1f}**" for n in names) + " |")
    print(
        "| records/s | "
        + " | ".join(f"{1e9 / results[n]['total'] / 1e6:.2f}M" for n in names)
        + " |"
    )

    if args.cprofile:
        for name in names:
            blobs = bd.build_blobs(keys, values, ts, codec_id(name))
            datas = [memoryview(bytearray(b)) for b in blobs]
            for d in datas:
                records.decode_records(d, topic="bench", partition=0, fetch_offset=0)
            prof = cProfile.Profile()
            prof.enable()
            for d in datas:
                records.decode_records(d, topic="bench", partition=0, fetch_offset=0)
            prof.disable()
            print(f"\ncProfile, codec {name}:")
            pstats.Stats(prof).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
