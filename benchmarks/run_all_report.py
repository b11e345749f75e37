"""What run_all.py writes into results.md: the table of targets (the daily set's, or issue
#22's with ``--scale``), the details of every benchmark, and the chart of read rates by
record size. It reads the figures of one run (``res``: kernel, read, write, memory) and
measures nothing."""

from __future__ import annotations

MiB = 1 << 20


def _rate(x):
    return f"{x / 1e6:.2f}M rows/s" if x >= 1e6 else f"{x:,.0f} rows/s"


def _records_rate(x):
    return _rate(x).replace("rows", "rec")


def _met(ok: bool) -> str:
    return "yes" if ok else "NO"


def _against(what, ours, peer, theirs, at_least, rate=_rate) -> tuple[str, str, str, str, str]:
    """One row: ours against the peer's figure, the ratio, and whether it reaches
    ``at_least`` (None: a row of context, no target)."""
    ratio = ours / theirs
    met = "-" if at_least is None else _met(ratio >= at_least)
    return (what, rate(ours), f"{peer} {rate(theirs)}", f"{ratio:.2f}x", met)


def _write_row(w: dict, what: str) -> tuple[str, str, str, str, str]:
    target = f"{what}: >= 2x confluent-kafka Producer"
    if "skipped" in w:
        return (target, "skipped", "", "", w["skipped"])
    return _against(target, w["ours"], "confluent-kafka", w["confluent"], 2)


def _memory_row(m: dict) -> tuple[str, str, str, str, str]:
    ratio = m["growth"] / m["fetch_bytes"]
    return (
        f"memory: read_range over {m['value_bytes'] / 1e9:.1f} GB, peak RSS growth "
        "<= 4 fetch sizes",
        f"{m['growth'] / MiB:.1f} MiB",
        f"fetch size {m['fetch_bytes'] / MiB:.0f} MiB",
        f"{ratio:.2f}x",
        _met(ratio <= 4),
    )


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
                    _records_rate(d["ours"]),
                    "aiokafka " + _records_rate(d["aiokafka"]),
                    f"{ratio:.2f}x",
                    f"{_met(d['ours'] >= floor)} / {_met(ratio >= 4)}",
                )
            )
        d = k["decode_1k"]
        rows.append(
            (
                "decode 1 KiB none: >= 3 GB/s of values",
                f"{d['ours_gbs']:.2f} GB/s",
                f"aiokafka {d['aiokafka_gbs']:.2f} GB/s",
                f"{d['ours_gbs'] / d['aiokafka_gbs']:.2f}x",
                _met(d["ours_gbs"] >= 3),
            )
        )
        e = k["encode"]
        row = _against(
            "encode 100 B none: >= 3M rec/s",
            e["ours"],
            "aiokafka",
            e["aiokafka"],
            None,
            _records_rate,
        )
        rows.append((*row[:4], _met(e["ours"] >= 3e6)))  # a floor, not a ratio
    r = res.get("read", {}).get(100)
    if r:
        rt = r["rates"]
        for action in ("count", "noop"):
            rows.append(
                _against(
                    f"read 100 B, Spark {action}: >= 80% of the ceiling source",
                    rt[f"pykafka {action}"],
                    "ceiling",
                    rt[f"ceiling {action}"],
                    0.8,
                )
            )
        rows.append(
            _against(
                "read 100 B, Spark count: >= 3x aiokafka",
                rt["pykafka count"],
                "aiokafka",
                rt["aiokafka python"],
                3,
            )
        )
        rows.append(
            _against(
                "(read 100 B into Python, no Spark: read_range, one thread, vs aiokafka)",
                rt["kafka_ds python"],
                "aiokafka",
                rt["aiokafka python"],
                3,
            )
        )
    w = res.get("write")
    if w is not None:
        rows.append(_write_row(w, "write 100 B"))
    m = res.get("memory")
    if m:
        rows.append(_memory_row(m))
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
        rows += [
            _against(
                f"read ({where}), Spark count: >= 0.75x the ceiling source",
                rt["pykafka count"],
                "ceiling",
                rt["ceiling count"],
                0.75,
            ),
            _against(
                f"read ({where}), Spark count: >= 7x aiokafka",
                rt["pykafka count"],
                "aiokafka",
                rt["aiokafka python"],
                7,
            ),
            _against(
                f"(read ({where}), Spark noop write, vs the ceiling source)",
                rt["pykafka noop"],
                "ceiling",
                rt["ceiling noop"],
                None,
            ),
        ]
    w = res.get("write")
    if w is not None:
        rows.append(
            _write_row(w, f"write ({w.get('rows', 0) / 1e6:g}M x 100 B, {w.get('broker', 'mock')})")
        )
    k = res.get("kernel")
    if k:
        d = k["decode"]["none"]
        rows.append(
            _against(
                "decode kernel (100 B, none): >= 3x aiokafka",
                d["ours"],
                "aiokafka",
                d["aiokafka"],
                3,
                _records_rate,
            )
        )
    m = res.get("memory")
    if m:
        rows.append(_memory_row(m))
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
