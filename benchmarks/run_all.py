"""Every benchmark of GitHub issue #5 in one run: one table of ours vs peer vs target.

    .venv/bin/python benchmarks/run_all.py            # full run (~4 min on 2 cores)
    .venv/bin/python benchmarks/run_all.py --quick    # smaller sizes (~2.5 min)
    .venv/bin/python benchmarks/run_all.py --scale    # issue #22's targets, 10M records on Tansu

``--scale`` measures the targets of issue #22 in one run: the batch read of 10M x 100 B
records (8 partitions, Tansu) against the ceiling source and aiokafka, the write of 10M
rows on Tansu against confluent-kafka, and the decode kernel (100 B, none) against
aiokafka; its table goes to its own section of ``benchmarks/results.md`` (after the
kept-part marker, replacing the previous scale run), the daily table stays.
``--records N`` sets the read and write sizes of a scale run (e.g. 1000000 for a try).

Runs, in this order (each figure next to its peer measured in the same run,
interleaved where possible, best of N -- the machine is shared and noisy):

1. decode kernel (``bench_decode.py``, one pinned core, in a subprocess): 100-byte
   values none/lz4/zstd and 1 KiB values none, vs aiokafka's Cython reader;
   encode kernel vs aiokafka's Cython builder;
2. end-to-end batch read (``bench_read.py``, librdkafka mock cluster, Spark local[2]):
   pykafka vs the dummy "ceiling" Python DataSource vs aiokafka, for 100 B, 1 KiB and
   10 KiB records (about 100 MB per size, so the mock's ~5 MiB/partition cap holds);
3. end-to-end write (``bench_write.py``, written by the writer side, in a subprocess):
   Spark ``df.write.format("pykafka")`` vs confluent-kafka's Producer; skipped with a
   line saying so when the file is missing or fails;
4. memory (``bench_memory.py``, Tansu): peak RSS growth of ``read_range`` over a
   ~2 GB partition (0.5 GB with ``--quick``) vs the fetch size.

Prints one Markdown table (target | ours | peer | ratio | met?) and writes it, with
the details of every benchmark, to ``benchmarks/results.md``, plus the plot
``benchmarks/rows_per_s_by_record_size.png`` (end-to-end read rows/s by record size).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import harness
from harness import HERE, ROOT, log
from run_all_report import details, markdown_table, plot, scale_rows, summary_rows

FULL = {
    "decode_records": 1_000_000,
    "decode_1k_records": 250_000,
    "decode_repeat": 5,
    "read_sizes": [(100, 1_000_000), (1024, 100_000), (10240, 10_000)],
    "read_repeat": 3,
    "write_rows": 1_000_000,
    "write_repeat": 2,
    "memory_gb": 2.0,
}
SCALE = {
    "decode_records": 1_000_000,
    "decode_1k_records": 250_000,
    "decode_repeat": 5,
    "read_sizes": [(100, 10_000_000)],
    "read_repeat": 2,
    "read_broker": "tansu",
    "read_partitions": 8,
    "write_rows": 10_000_000,
    "write_repeat": 2,
    "write_broker": "tansu",
    "memory_gb": 2.0,
}
QUICK = {
    "decode_records": 200_000,
    "decode_1k_records": 50_000,
    "decode_repeat": 3,
    "read_sizes": [(100, 300_000), (1024, 30_000), (10240, 3_000)],
    "read_repeat": 2,
    "write_rows": 200_000,
    "write_repeat": 1,
    "memory_gb": 0.5,
}


def run_json(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, *args], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the phases ------------------------------------------------------------------------------


def phase_kernel(cfg) -> dict:
    log(f"decode kernel: {cfg['decode_records']:,} x 100 B, none/lz4/zstd + encode")
    small = run_json(
        [
            "benchmarks/bench_decode.py",
            "--json",
            "--records",
            str(cfg["decode_records"]),
            "--repeat",
            str(cfg["decode_repeat"]),
        ]
    )
    log(f"decode kernel: {cfg['decode_1k_records']:,} x 1 KiB, none")
    big = run_json(
        [
            "benchmarks/bench_decode.py",
            "--json",
            "--records",
            str(cfg["decode_1k_records"]),
            "--value-size",
            "1024",
            "--codecs",
            "none",
            "--no-encode",
            "--repeat",
            str(cfg["decode_repeat"]),
        ]
    )
    return {
        "decode": {r["codec"]: r for r in small["decode"]},
        "decode_1k": big["decode"][0],
        "encode": small["encode"],
    }


def phase_read(cfg) -> dict:
    import bench_read as br

    broker = cfg.get("read_broker", "mock")
    partitions = cfg.get("read_partitions", br.PARTITIONS)
    spark, cluster = br.start(broker)
    out = {}
    try:
        for value_size, records in cfg["read_sizes"]:
            log(f"end-to-end read: {records:,} x {value_size} B, {broker}, {partitions} partitions")
            cpu = {}
            rate = br.measure(
                spark,
                cluster,
                records,
                value_size,
                cfg["read_repeat"],
                log=log,
                partitions=partitions,
                cpu=cpu,
            )
            out[value_size] = {
                "records": records,
                "broker": broker,
                "partitions": partitions,
                "rates": {f"{k[0]} {k[1]}": v for k, v in rate.items()},
                "cpu": {f"{k[0]} {k[1]}": v for k, v in cpu.items()},
            }
    finally:
        spark.stop()
        cluster.stop()
    return out


_BEST = re.compile(r"best: kafka_ds.*?([\d,]+) rows/s \| confluent-kafka.*?([\d,]+) rows/s")


def phase_write(cfg) -> dict:
    path = os.path.join(HERE, "bench_write.py")
    if not os.path.exists(path):
        return {"skipped": "benchmarks/bench_write.py does not exist (yet)"}
    broker = cfg.get("write_broker", "mock")
    log(f"end-to-end write: {cfg['write_rows']:,} rows on {broker} (bench_write.py)")
    proc = subprocess.run(
        [
            sys.executable,
            path,
            "--rows",
            str(cfg["write_rows"]),
            "--repeat",
            str(cfg["write_repeat"]),
            "--broker",
            broker,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    match = _BEST.search(proc.stdout)
    if proc.returncode or not match:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        return {"skipped": f"bench_write.py failed (exit {proc.returncode}): " + " / ".join(tail)}
    ours, theirs = (float(g.replace(",", "")) for g in match.groups())
    return {
        "rows": cfg["write_rows"],
        "broker": broker,
        "ours": ours,
        "confluent": theirs,
        "output": proc.stdout.strip(),
    }


def phase_memory(cfg) -> dict:
    import bench_memory as bm

    log(f"memory: read_range over ~{cfg['memory_gb']} GB on Tansu")
    return bm.run(cfg["memory_gb"], log=log)


def main(argv=None):
    ap = harness.parser(__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes: a few minutes")
    ap.add_argument(
        "--scale",
        action="store_true",
        help="issue #22's targets: 10M records on Tansu (its own results section)",
    )
    ap.add_argument(
        "--records",
        type=int,
        default=None,
        help="with --scale: records read and rows written (default 10M)",
    )
    ap.add_argument(
        "--only", default="kernel,read,write,memory", help="comma separated phases (default: all)"
    )
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    ap.add_argument("--plot", default=os.path.join(HERE, "rows_per_s_by_record_size.png"))
    args = ap.parse_args(argv)
    if args.scale and args.quick:
        ap.error("--scale and --quick exclude each other")
    if args.records is not None and not args.scale:
        ap.error("--records goes with --scale")
    cfg = SCALE if args.scale else QUICK if args.quick else FULL
    if args.scale and args.records:
        cfg = {**cfg, "read_sizes": [(100, args.records)], "write_rows": args.records}
    phases = args.only.split(",")
    started = time.perf_counter()
    res = {}
    if "kernel" in phases:
        res["kernel"] = phase_kernel(cfg)
    if "read" in phases:
        res["read"] = phase_read(cfg)
    if "write" in phases:
        res["write"] = phase_write(cfg)
        if "skipped" in res["write"]:
            log(f"write: SKIPPED -- {res['write']['skipped']}")
    if "memory" in phases:
        res["memory"] = phase_memory(cfg)
    elapsed = time.perf_counter() - started

    table = markdown_table(scale_rows(res) if args.scale else summary_rows(res))
    command = harness.command_line("run_all.py", argv)
    header = (
        f"Command: `{command}` -- {harness.stamp()}, "
        f"{elapsed / 60:.1f} min.  Machine: {harness.machine_and_load()}.  Shared, noisy machine: every "
        "ratio compares two figures measured in the same run."
    )
    print()
    print(header)
    print()
    print(table)
    if args.scale:
        harness.replace_section(
            args.out,
            "scale",
            "\n\n".join(
                [
                    "## Issue #22 targets at scale (`run_all.py --scale`)",
                    header,
                    table,
                    details(res),
                ]
            ),
        )
        harness.write_json(
            os.path.splitext(args.out)[0] + "_scale.json",
            {"scale": True, "cfg": cfg, "results": res},
        )
        print(f"\nwrote the scale section of {harness.relative(args.out)}")
        return
    kept = harness.kept_sections(args.out)
    with open(args.out, "w") as f:
        f.write(f"# Benchmark results\n\n{header}\n\n{table}\n\n## Details\n\n{details(res)}\n")
        f.write(kept)
    if res.get("read"):
        plot(res["read"], args.plot)
        print(f"\nwrote {harness.relative(args.out)} and {harness.relative(args.plot)}")
    else:
        print(f"\nwrote {harness.relative(args.out)}")
    harness.write_json(
        os.path.splitext(args.out)[0] + ".json", {"quick": args.quick, "results": res}
    )


if __name__ == "__main__":
    main()
