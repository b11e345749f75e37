"""bench_jvm.py's figures as tables, as targets and as a chart, and its sections of results.md.

    .venv/bin/python benchmarks/jvm_report.py benchmarks/results_jvm.json docs/images/bench_jvm.png

:func:`tables` puts a run's rates side by side, one column per connector, and
:func:`raw_figures` keeps them as the JSON this file reads back. :func:`targets_table` holds pykafka's figures against the tuned connector's to issue #39's
targets (throughput: pykafka's rows/s as a multiple of the connector's, higher is better;
latency: pykafka's milliseconds as a multiple of the connector's, lower is better).
:func:`draw` draws the figures of one run: rows/s per path for each connector, and the
streaming latency percentiles. bench_jvm.py calls both; it runs in the connector's pyspark
venv, which has no matplotlib, so there it runs this file with the Python it was started
with (the project's venv).
"""

from __future__ import annotations

import json
import os
import sys

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES_JSON = os.path.join(HERE, "results_jvm.json")

PYKAFKA, DEFAULTS, TUNED = "pykafka", "kafka, defaults", "kafka, tuned"
#: the connectors bench_jvm.py runs, in the order of the tables' columns
CONNECTORS = (PYKAFKA, DEFAULTS, TUNED)
#: a Python source of ready-made batches, or a Python sink that writes nothing: what Spark's
#: Python data source machinery costs alone, the bound of any Python connector
CEILING = "ceiling"
BYTE_LIMIT_OFF = ", pykafka with maxBytesPerBatch=2147483647"

# (what, where the figures are, key, target, higher is better)
TARGETS = [
    ("read, `count()`", "reads", "count", 1.5, True),
    ("binary write", "writes", "write, binary", 1.5, True),
    (
        "Avro write, `spark.sql.execution.arrow.maxBytesPerBatch` off (docs/performance.md)",
        "writes",
        "write, Avro" + BYTE_LIMIT_OFF,
        1.2,
        True,
    ),
    ("Avro write at Spark's defaults", "writes", "write, Avro", 1.0, True),
]
LATENCY_TARGETS = [("p50", 1.0), ("p99", 1.2)]


def _pair(figures: dict, where: str, key: str):
    """pykafka's figure, the tuned connector's and the ceiling's for one path (the connector
    hands no rows to Python, so the byte limit leaves its figure as it is: its plain
    write's)."""
    table = figures.get(where, {})
    ours = table.get(key, {}).get(PYKAFKA)
    theirs = table.get(key.replace(BYTE_LIMIT_OFF, ""), {}).get(TUNED)
    return ours, theirs, table.get(key, {}).get(CEILING)


#: stream_floor.py's query with a Python source and a Python sink that do nothing
FLOOR_QUERY = "do-nothing Python source -> do-nothing Python sink"


def targets(figures: dict) -> list[dict]:
    """One row per target: the two figures, pykafka's as a multiple, the target, met?, and
    the ceiling's multiple (what a Python connector doing nothing reaches)."""
    out = []
    for what, where, key, target, higher in TARGETS:
        ours, theirs, ceiling = _pair(figures, where, key)
        out.append(_target_row(what, ours, theirs, target, higher, "rows/s", ceiling))
    floor = figures.get("floor", {}).get(FLOOR_QUERY, {}).get("triggerExecution")
    for rate in figures.get("rates", []):
        phases = figures.get("stream", {}).get(str(rate), {})
        tuned_trigger = phases.get(TUNED, {}).get("triggers", {}).get("triggerExecution")
        for percentile, target in LATENCY_TARGETS:
            ours = phases.get(PYKAFKA, {}).get("latency_ms", {}).get(percentile)
            theirs = phases.get(TUNED, {}).get("latency_ms", {}).get(percentile)
            row = _target_row(
                f"streaming {percentile} at {rate:,} records/s", ours, theirs, target, False, "ms"
            )
            if floor and tuned_trigger:
                # a trigger's median duration, not a latency: the floor's against the
                # connector's own, in the same session
                row["ceiling_ratio"] = floor / tuned_trigger
            out.append(row)
    return out


def _target_row(what, ours, theirs, target, higher, unit, ceiling=None) -> dict:
    ratio = ours / theirs if ours and theirs else None
    met = None if ratio is None else (ratio >= target if higher else ratio <= target)
    return {
        "what": what,
        "pykafka": ours,
        "tuned": theirs,
        "ratio": ratio,
        "target": f"{'>=' if higher else '<='} {target:.1f}x",
        "met": met,
        "unit": unit,
        "ceiling_ratio": ceiling / theirs if ceiling and theirs else None,
    }


def _figure(value, unit) -> str:
    if value is None:
        return "--"
    return f"{value / 1e6:.2f}M" if unit == "rows/s" else f"{value:.0f} ms"


def targets_table(figures: dict) -> str:
    lines = [
        '| path | pykafka | `format("kafka")`, tuned | pykafka as a multiple | target | met '
        "| Spark's own cost as a multiple (a Python source/sink doing nothing) |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for row in targets(figures):
        ratio = "--" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        bound = "--" if row["ceiling_ratio"] is None else f"{row['ceiling_ratio']:.2f}x"
        met = {True: "yes", False: "**no**", None: "not measured"}[row["met"]]
        lines.append(
            f"| {row['what']} | {_figure(row['pykafka'], row['unit'])} | "
            f"{_figure(row['tuned'], row['unit'])} | {ratio} | {row['target']} | {met} | {bound} |"
        )
    return "\n".join(lines)


# --- the tables --------------------------------------------------------------------------------


def fmt_rate(rate):
    return f"{rate / 1e6:.2f}M"


def tables(read_rates, write_rates, stream, args, in_range):
    labels = list(CONNECTORS)
    lines = [
        f"| rows/s, best of {args.repeat} (pykafka Nx: pykafka's rate over this one's) | "
        f"{' | '.join(labels)} |",
        "|---|" + "---:|" * len(labels),
    ]
    for name in ("count", "sum(length(value))"):
        lines.append(row(f"read, `{name}`", [read_rates.get((name, lab)) for lab in labels]))
    if ("count", CEILING) in read_rates:
        lines.append(
            row(
                "read, `count`, of a Python source of ready-made batches (no I/O, no decoding: "
                "Spark's own cost) in the first column",
                [read_rates[("count", CEILING)]]
                + [read_rates.get(("count", lab)) for lab in labels[1:]],
                first="Spark alone",
            )
        )
    ts = "last 1% by timestamp"
    lines.append(
        row(
            f"read, {ts} ({in_range:,} rows), seconds; pykafka `pushFilters`, "
            "Spark `startingTimestamp`",
            [read_rates.get((ts, labels[0]))]
            + [read_rates.get((ts, lab + " (startingTimestamp)")) for lab in labels[1:]],
        )
    )
    lines.append(
        row(
            f"read, {ts}, seconds; Spark given the start offsets as JSON",
            [read_rates.get((ts, labels[0]))]
            + [read_rates.get((ts, lab + " (offsets given)")) for lab in labels[1:]],
        )
    )
    for name in ("write, binary", "write, Avro"):
        if any((name, lab) in write_rates for lab in labels):
            lines.append(row(name, [write_rates.get((name, lab)) for lab in labels]))
        if (name + BYTE_LIMIT_OFF, labels[0]) in write_rates:  # the connector's as above
            lines.append(
                row(
                    name + BYTE_LIMIT_OFF,
                    [write_rates[name + BYTE_LIMIT_OFF, labels[0]]]
                    + [write_rates.get((name, lab)) for lab in labels[1:]],
                )
            )
        for variant in (name, name + BYTE_LIMIT_OFF):
            if (variant, CEILING) in write_rates:
                lines.append(
                    row(
                        f"{variant}, into a Python sink that writes nothing (Spark's own cost) "
                        "in the first column",
                        [write_rates[variant, CEILING]]
                        + [write_rates.get((name, lab)) for lab in labels[1:]],
                        first="Spark alone",
                    )
                )
    out = "\n".join(lines)
    if stream:
        s = [
            "| streaming, produce-to-visible ms (p50 / p99) | " + " | ".join(labels) + " |",
            "|---|" + "---:|" * len(labels),
        ]
        for rate in args.rates:
            cells = []
            for lab in labels:
                ph = stream.get((rate, lab), {})
                if "error" in ph:
                    cells.append("failed: " + ph["error"].splitlines()[0][:80])
                elif ph:
                    lat = ph["latency_ms"]
                    lost = (f", {ph['missing']} missing" if ph["missing"] else "") + (
                        f", {ph['duplicated']} duplicated" if ph["duplicated"] else ""
                    )
                    cells.append(f"{lat.get('p50')} / {lat.get('p99')}{lost}")
                else:
                    cells.append("--")
            s.append(
                f"| {rate:,} records/s, {args.stream_seconds:g} s | " + " | ".join(cells) + " |"
            )
        out += "\n\n" + "\n".join(s)
    return out


def row(name, rates, first="pykafka"):
    """Rows/s, and pykafka's rate over this column's; a negative figure is seconds (a
    query whose rows/s would mislead: the timestamp range), with this column's time over
    pykafka's."""
    base = rates[0]
    cells = []
    for i, rate in enumerate(rates):
        if rate is None:
            cells.append("--")
        elif rate < 0:
            cells.append(
                f"{-rate:.2f} s"
                if i == 0 or not base
                else f"{-rate:.2f} s ({first} {rate / base:.2f}x)"
            )
        elif i == 0 or not base:
            cells.append(fmt_rate(rate))
        else:
            cells.append(f"{fmt_rate(rate)} ({first} {base / rate:.2f}x)")
    return f"| {name} | " + " | ".join(cells) + " |"


def breakdown_table(stream, floor, args) -> str:
    """--stream-breakdown: the median of each trigger stage (ms) of every query at the first
    rate, and of stream_floor.py's queries (Spark's own cost, no Kafka) in the same session."""
    import stream_floor

    rate = args.rates[0]
    rows = [
        (f"{label}, {rate:,} records/s", phase["triggers"])
        for (at, label), phase in stream.items()
        if at == rate and "triggers" in phase
    ]
    return (
        "Where a trigger's time goes (median ms of Spark's trigger stages; the last rows: "
        "stream_floor.py's do-nothing Python source and sink, no Kafka):\n\n"
        + stream_floor.table(rows + floor)
    )


def raw_figures(read_rates, write_rates, stream, args) -> dict:
    """The run's figures as JSON-able dicts: {path: {connector: rows/s}}, and for streams
    {rate: {connector: phase}}; what :func:`targets` and :func:`draw` read."""
    reads, writes = {}, {}
    for (key, label), value in read_rates.items():
        reads.setdefault(key, {})[label] = value
    for (key, label), value in write_rates.items():
        writes.setdefault(key, {})[label] = value
    streams = {}
    for (rate, label), phase in stream.items():
        streams.setdefault(str(rate), {})[label] = phase
    return {
        "records": args.records,
        "write_records": args.write_records,
        "repeat": args.repeat,
        "rates": args.rates,
        "reads": reads,
        "writes": writes,
        "stream": streams,
    }


# --- the chart -----------------------------------------------------------------------------------

PATHS = [  # (label on the chart, where, key)
    ("read\ncount()", "reads", "count"),
    ("read\nsum(length)", "reads", "sum(length(value))"),
    ("write\nbinary", "writes", "write, binary"),
    ("write binary,\nbyte limit off", "writes", "write, binary" + BYTE_LIMIT_OFF),
    ("write\nAvro", "writes", "write, Avro"),
    ("write Avro,\nbyte limit off", "writes", "write, Avro" + BYTE_LIMIT_OFF),
]
COLOURS = {PYKAFKA: "#1f77b4", DEFAULTS: "#c7c7c7", TUNED: "#ff7f0e", CEILING: "#ffffff"}
NAMES = {CEILING: "Spark alone (a Python source/sink doing nothing)"}


def _rate(figures, where, key, label):
    table = figures.get(where, {})
    if key.endswith(BYTE_LIMIT_OFF) and label not in (PYKAFKA, CEILING):
        key = key.replace(BYTE_LIMIT_OFF, "")  # the connector's rows never reach Python
    value = table.get(key, {}).get(label)
    return value if value and value > 0 else None


def _grouped_bars(ax, names, series, number) -> None:
    """A group of bars per name, a bar per ``(label, values)`` of ``series``, each value
    written above its bar (``number``: its format) except the connector's defaults'."""
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(names))]
        bars = ax.bar(
            xs,
            values,
            width,
            label=NAMES.get(label, label),
            color=COLOURS[label],
            edgecolor="#555555" if label == CEILING else None,
            hatch="//" if label == CEILING else None,
        )
        if label != DEFAULTS:
            ax.bar_label(
                bars, labels=[number.format(v) if v else "" for v in values], fontsize=7, padding=1
            )
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)


def draw(figures: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [PYKAFKA, DEFAULTS, TUNED]
    paths = [p for p in PATHS if _rate(figures, p[1], p[2], PYKAFKA)]
    bars_of = labels + [CEILING] * any(_rate(figures, p[1], p[2], CEILING) for p in paths)
    rates = figures.get("rates", [])
    streams = figures.get("stream", {})
    panels = 1 + bool(streams)
    fig, axes = plt.subplots(
        1,
        panels,
        figsize=(6.5 * panels, 4.6),
        dpi=110,
        squeeze=False,
        gridspec_kw={"width_ratios": [1.6, 1][:panels]},
    )
    ax = axes[0][0]
    _grouped_bars(
        ax,
        [name for name, *_ in paths],
        [
            (label, [(_rate(figures, where, key, label) or 0) / 1e6 for _, where, key in paths])
            for label in bars_of
        ],
        "{:.2f}",
    )
    ax.set_ylabel("million rows/s (higher is better)")
    ax.set_title(f"Throughput, {figures.get('records', 0):,} records of 100 B", fontsize=10)
    ax.margins(y=0.2)  # room for the legend above the bars
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    if streams:
        groups = [(str(rate), pct) for rate in rates for pct in ("p50", "p99")]
        ax = axes[0][1]
        _grouped_bars(
            ax,
            [f"{int(rate):,}/s\n{pct}" for rate, pct in groups],
            [
                (
                    label,
                    [
                        streams.get(rate, {}).get(label, {}).get("latency_ms", {}).get(pct) or 0
                        for rate, pct in groups
                    ],
                )
                for label in labels
            ],
            "{:.0f}",
        )
        ax.set_ylabel("produce-to-visible ms (lower is better)")
        ax.set_title("Streaming latency, readStream -> writeStream", fontsize=10)
    fig.suptitle(figures.get("title", ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def draw_chart(python, chart):
    """:func:`draw` here if this Python has matplotlib, else this file run by ``python``."""
    os.makedirs(os.path.dirname(chart), exist_ok=True)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        import subprocess

        subprocess.run(
            [python, os.path.join(HERE, "jvm_report.py"), FIGURES_JSON, chart],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return
    with open(FIGURES_JSON) as f:
        draw(json.load(f), chart)


def report_text(read_rates, write_rates, stream, floor, args, in_range, figures) -> str:
    """The tables of a run, the trigger breakdown (with ``--stream-breakdown``) and the
    targets: what bench_jvm.py prints and puts into results.md."""
    text = tables(read_rates, write_rates, stream, args, in_range)
    if args.stream_breakdown and floor:
        text += "\n\n" + breakdown_table(stream, floor, args)
    return text + (
        "\n\nTargets (issue #39; pykafka at its defaults against the tuned connector):\n\n"
        + targets_table(figures)
    )


def write_results(args, header, text, figures, profiled) -> None:
    """results.md's "jvm" section, results_jvm.json and the chart; or, for a ``--profile``
    run, its "jvm-profile" section only."""
    path = harness.RESULTS_MD
    if args.profiler:
        # a profiling run's figures are slowed by the recorders: its own section, and the
        # "jvm" section, its JSON and its chart stay those of a plain run
        harness.replace_section(
            path,
            "jvm-profile",
            '### Where the time goes against Spark\'s `format("kafka")` (`bench_jvm.py '
            "--profile`)\n\n" + header + "\n\n" + profiled,
        )
        print(f"\nwrote the jvm-profile section of {os.path.relpath(path)}")
        return
    chart = os.path.join(harness.ROOT, "docs", "images", "bench_jvm.png")
    harness.replace_section(
        path,
        "jvm",
        '## Against Spark\'s `format("kafka")` (`bench_jvm.py`)\n\n'
        + header
        + "\n\n"
        + text
        + "\n\nChart: `docs/images/bench_jvm.png` (drawn by this run).",
    )
    with open(FIGURES_JSON, "w") as f:
        json.dump(figures, f, indent=1, sort_keys=True)
    draw_chart(args.drawing_python, chart)
    print(f"\nwrote the jvm section of {os.path.relpath(path)}, {FIGURES_JSON}, {chart}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        figures = json.load(f)
    draw(figures, argv[1])
    print(targets_table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
