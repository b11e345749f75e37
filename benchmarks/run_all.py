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
from harness import (  # replace_section: bench_jvm.py imports it from here
    HERE,
    ROOT,
    log,
    replace_section,  # noqa: F401
)

MiB = 1 << 20

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


# --- the table ------------------------------------------------------------------------------


def _rate(x):
    return f"{x / 1e6:.2f}M rows/s" if x >= 1e6 else f"{x:,.0f} rows/s"


def summary_rows(res: dict) -> list[tuple[str, str, str, str, str]]:
    rows = []
    k = res.get("kernel")
    if k:
        for codec, floor in (("none", 5e6), ("lz4", 4e6), ("zstd", 3e6)):
            d = k["decode"][codec]
            ratio = d["ours"] / d["aiokafka"]
            rows.append(
                (
                    f"decode 100 B {codec}: >= {floor / 1e6:.0f}M rec/s, >= 4x aiokafka",
                    _rate(d["ours"]).replace("rows", "rec"),
                    "aiokafka " + _rate(d["aiokafka"]).replace("rows", "rec"),
                    f"{ratio:.2f}x",
                    f"{'yes' if d['ours'] >= floor else 'NO'} / {'yes' if ratio >= 4 else 'NO'}",
                )
            )
        d = k["decode_1k"]
        rows.append(
            (
                "decode 1 KiB none: >= 3 GB/s of values",
                f"{d['ours_gbs']:.2f} GB/s",
                f"aiokafka {d['aiokafka_gbs']:.2f} GB/s",
                f"{d['ours_gbs'] / d['aiokafka_gbs']:.2f}x",
                "yes" if d["ours_gbs"] >= 3 else "NO",
            )
        )
        e = k["encode"]
        rows.append(
            (
                "encode 100 B none: >= 3M rec/s",
                _rate(e["ours"]).replace("rows", "rec"),
                "aiokafka " + _rate(e["aiokafka"]).replace("rows", "rec"),
                f"{e['ours'] / e['aiokafka']:.2f}x",
                "yes" if e["ours"] >= 3e6 else "NO",
            )
        )
    r = res.get("read", {}).get(100)
    if r:
        rt = r["rates"]
        for action in ("count", "noop"):
            ratio = rt[f"pykafka {action}"] / rt[f"ceiling {action}"]
            rows.append(
                (
                    f"read 100 B, Spark {action}: >= 80% of the ceiling source",
                    _rate(rt[f"pykafka {action}"]),
                    "ceiling " + _rate(rt[f"ceiling {action}"]),
                    f"{ratio:.2f}x",
                    "yes" if ratio >= 0.8 else "NO",
                )
            )
        ratio = rt["pykafka count"] / rt["aiokafka python"]
        rows.append(
            (
                "read 100 B, Spark count: >= 3x aiokafka",
                _rate(rt["pykafka count"]),
                "aiokafka " + _rate(rt["aiokafka python"]),
                f"{ratio:.2f}x",
                "yes" if ratio >= 3 else "NO",
            )
        )
        ratio = rt["kafka_ds python"] / rt["aiokafka python"]
        rows.append(
            (
                "(read 100 B into Python, no Spark: read_range, one thread, vs aiokafka)",
                _rate(rt["kafka_ds python"]),
                "aiokafka " + _rate(rt["aiokafka python"]),
                f"{ratio:.2f}x",
                "yes" if ratio >= 3 else "NO",
            )
        )
    w = res.get("write")
    if w is not None:
        if "skipped" in w:
            rows.append(
                ("write 100 B: >= 2x confluent-kafka Producer", "skipped", "", "", w["skipped"])
            )
        else:
            ratio = w["ours"] / w["confluent"]
            rows.append(
                (
                    "write 100 B: >= 2x confluent-kafka Producer",
                    _rate(w["ours"]),
                    "confluent-kafka " + _rate(w["confluent"]),
                    f"{ratio:.2f}x",
                    "yes" if ratio >= 2 else "NO",
                )
            )
    m = res.get("memory")
    if m:
        ratio = m["growth"] / m["fetch_bytes"]
        rows.append(
            (
                f"memory: read_range over {m['value_bytes'] / 1e9:.1f} GB, peak RSS growth "
                "<= 4 fetch sizes",
                f"{m['growth'] / MiB:.1f} MiB",
                f"fetch size {m['fetch_bytes'] / MiB:.0f} MiB",
                f"{ratio:.2f}x",
                "yes" if ratio <= 4 else "NO",
            )
        )
    return rows


def scale_rows(res: dict) -> list[tuple[str, str, str, str, str]]:
    """Issue #22's targets, each a ratio of two figures measured in this run; rows whose
    target is "-" are context."""
    rows = []
    r = res.get("read", {}).get(100)
    if r:
        rt = r["rates"]
        where = (
            f"{r['records'] / 1e6:g}M x 100 B, {r.get('broker', 'mock')}, "
            f"{r.get('partitions', '?')} partitions"
        )
        ratio = rt["pykafka count"] / rt["ceiling count"]
        rows.append(
            (
                f"read ({where}), Spark count: >= 0.75x the ceiling source",
                _rate(rt["pykafka count"]),
                "ceiling " + _rate(rt["ceiling count"]),
                f"{ratio:.2f}x",
                "yes" if ratio >= 0.75 else "NO",
            )
        )
        ratio = rt["pykafka count"] / rt["aiokafka python"]
        rows.append(
            (
                f"read ({where}), Spark count: >= 7x aiokafka",
                _rate(rt["pykafka count"]),
                "aiokafka " + _rate(rt["aiokafka python"]),
                f"{ratio:.2f}x",
                "yes" if ratio >= 7 else "NO",
            )
        )
        ratio = rt["pykafka noop"] / rt["ceiling noop"]
        rows.append(
            (
                f"(read ({where}), Spark noop write, vs the ceiling source)",
                _rate(rt["pykafka noop"]),
                "ceiling " + _rate(rt["ceiling noop"]),
                f"{ratio:.2f}x",
                "-",
            )
        )
    w = res.get("write")
    if w is not None:
        what = f"write ({w.get('rows', 0) / 1e6:g}M x 100 B, {w.get('broker', 'mock')})"
        if "skipped" in w:
            rows.append(
                (f"{what}: >= 2x confluent-kafka Producer", "skipped", "", "", w["skipped"])
            )
        else:
            ratio = w["ours"] / w["confluent"]
            rows.append(
                (
                    f"{what}: >= 2x confluent-kafka Producer",
                    _rate(w["ours"]),
                    "confluent-kafka " + _rate(w["confluent"]),
                    f"{ratio:.2f}x",
                    "yes" if ratio >= 2 else "NO",
                )
            )
    k = res.get("kernel")
    if k:
        d = k["decode"]["none"]
        ratio = d["ours"] / d["aiokafka"]
        rows.append(
            (
                "decode kernel (100 B, none): >= 3x aiokafka",
                _rate(d["ours"]).replace("rows", "rec"),
                "aiokafka " + _rate(d["aiokafka"]).replace("rows", "rec"),
                f"{ratio:.2f}x",
                "yes" if ratio >= 3 else "NO",
            )
        )
    m = res.get("memory")
    if m:
        rows += [row for row in summary_rows({"memory": m})]
    return rows


def markdown_table(rows) -> str:
    lines = ["| target | ours | peer | ratio | target met? |", "|---|---:|---:|---:|---|"]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    return "\n".join(lines)


def details(res: dict) -> str:
    out = []
    k = res.get("kernel")
    if k:
        out += [
            "### Decode / encode kernel (one pinned core, best of N)",
            "",
            "| codec | value | records | avg response MB | kafka_ds rec/s | aiokafka rec/s | "
            "ratio | kafka_ds value GB/s | aiokafka value GB/s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for d in list(k["decode"].values()) + [k["decode_1k"]]:
            out.append(
                f"| {d['codec']} | {d['value_size']} B | {d['records']:,} | "
                f"{d['avg_mb']:.2f} | {d['ours']:,.0f} | {d['aiokafka']:,.0f} | "
                f"{d['ours'] / d['aiokafka']:.2f}x | {d['ours_gbs']:.2f} | "
                f"{d['aiokafka_gbs']:.2f} |"
            )
        e = k["encode"]
        out += [
            "",
            f"Encode, 100 B values, 500 records/batch, uncompressed: kafka_ds "
            f"{e['ours']:,.0f} rec/s, aiokafka builder {e['aiokafka']:,.0f} rec/s "
            f"({e['ours'] / e['aiokafka']:.2f}x).",
            "",
        ]
    if res.get("read"):
        first = next(iter(res["read"].values()))
        broker = "mock cluster" if first.get("broker", "mock") == "mock" else first["broker"]
        out += [
            f"### End-to-end batch read ({broker}, {first.get('partitions', 32)} partitions, "
            "local[2], rows/s)",
            "",
            "| value size | records | pykafka count | ceiling count | pykafka noop | "
            "ceiling noop | kafka_ds read_range (Python) | aiokafka (Python) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for size, r in sorted(res["read"].items()):
            rt = r["rates"]
            out.append(
                f"| {size} B | {r['records']:,} | {rt['pykafka count']:,.0f} | "
                f"{rt['ceiling count']:,.0f} | {rt['pykafka noop']:,.0f} | "
                f"{rt['ceiling noop']:,.0f} | {rt['kafka_ds python']:,.0f} | "
                f"{rt['aiokafka python']:,.0f} |"
            )
        out.append("")
        for size, r in sorted(res["read"].items()):
            if r.get("cpu"):
                import bench_read as br

                cpu = {tuple(k.split(" ", 1)): v for k, v in r["cpu"].items()}
                out += [
                    f"CPU per row of each Spark read's fastest run, {size} B values "
                    "(every process shares the machine's 2 cores; the broker: Tansu "
                    "only):",
                    "",
                    br.cpu_table(cpu, r["records"]),
                    "",
                ]
    w = res.get("write")
    if w and "output" in w:
        out += [
            f"### End-to-end write (bench_write.py output, {w.get('broker', 'mock')})",
            "",
            "```",
            w["output"],
            "```",
            "",
        ]
    m = res.get("memory")
    if m:
        import bench_memory as bm

        out += ["### Memory (bench_memory.py, Tansu)", "", "```", bm.report(m), "```", ""]
    return "\n".join(out)


def plot(read: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(read)
    series = [
        ("pykafka count (Spark)", "pykafka count", "o-"),
        ("ceiling count (dummy Python source)", "ceiling count", "s--"),
        ("pykafka noop write (Spark)", "pykafka noop", "o:"),
        ("kafka_ds read_range (Python, no Spark)", "kafka_ds python", "^-"),
        ("aiokafka consumer (Python)", "aiokafka python", "v-"),
    ]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for label, key, style in series:
        ax.plot(sizes, [read[s]["rates"][key] for s in sizes], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.set_xticklabels([f"{s} B" if s < 1024 else f"{s // 1024} KiB" for s in sizes])
    ax.set_xlabel("record value size")
    ax.set_ylabel("rows/s (log)")
    ax.set_title("End-to-end read, mock cluster, 32 partitions, local[2]")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def machine() -> str:
    return f"{harness.machine()}; load average at the end {harness.load_average()[0]:.1f}"


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
        f"{elapsed / 60:.1f} min.  Machine: {machine()}.  Shared, noisy machine: every "
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
