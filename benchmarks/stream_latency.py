"""Streaming latency: produce-to-visible through a pykafka -> pykafka query on Tansu.

    .venv/bin/python benchmarks/stream_latency.py                      # ~6 min
    .venv/bin/python benchmarks/stream_latency.py --seconds 20 --ramp-max 60000   # quick look

Starts Tansu (memory storage, tests/support/brokers.py) with an input and an output topic of
``--partitions`` partitions, and a Spark ``local[2]`` session running

    spark.readStream.format("pykafka").option("subscribe", IN) ... .load()
         .select("key", "value")
         .writeStream.format("pykafka").option("topic", OUT) ... .start()

with the default trigger (a micro-batch as soon as the previous one ended; Spark asks
the source for new data every ~10 ms while idle). Two clients that know nothing of
Spark measure it (stream_probe.py):

* a **producer** (confluent-kafka ``Producer``, acks=all, idempotent, ``linger.ms=1``,
  in its own process so that the measuring consumer never holds it up) writes
  ``--value-size``-byte values at a fixed rate; each value starts with (phase, sequence
  number, ``time.time_ns()`` taken right before ``produce()``);
* a **consumer** (confluent-kafka ``Consumer``, ``fetch.wait.max.ms=10``, in this
  process) reads the output topic from the start and takes, per record, the time it
  got the record minus the stamped produce time: the produce-to-visible latency. It
  also checks every record arrived, once.

Phases: a short warm-up (not reported), then ``--rates`` (default 1k and 20k records/s)
for ``--seconds`` each: p50/p99/max latency, the records per micro-batch and the
median of Spark's per-trigger durations (``query.recentProgress``: latestOffset,
walCommit, addBatch, commitOffsets, ...); then the ramp: rates from ``--ramp-start``
times ``--ramp-factor`` per step, each held for two ``--window``-second windows. A step
is sustained when the lag (records produced, not yet visible) averaged over the last
quarter of its second window exceeds that of its first window by less than half a
second of records, and the producer reached 95 % of the rate; the ramp stops at the
first step that is not. The query drains (lag 0) before each phase.

All of it runs on the same 2 cores: Tansu, Spark's JVM and Python workers and both
measuring clients (their CPU share per phase is printed). Prints Markdown tables
(and ``--json`` writes the raw figures).
"""

from __future__ import annotations

import json
import os
import statistics
import time

import harness
from stream_probe import STAMP, LatencyRun


def ramp_verdict(step, window, rate) -> tuple[bool, float]:
    """(sustained, lag growth in seconds of records) of a two-window ramp step."""
    samples = step["lag_samples"]

    def tail_mean(lo, hi):
        values = [lag for t, lag in samples if lo + 0.75 * (hi - lo) <= t < hi]
        return statistics.fmean(values) if values else float("nan")

    growth = (tail_mean(window, 2 * window) - tail_mean(0, window)) / rate
    sustained = growth < 0.5 and step["achieved_rate"] >= 0.95 * rate
    return sustained, growth


# --- report ---------------------------------------------------------------------------------


def cpu_text(cpu):
    return ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())


def fixed_table(phases) -> str:
    lines = [
        "| rate (records/s) | produced | p50 latency | p99 latency | max | micro-batches | "
        "rows/batch | median trigger: latestOffset / walCommit / addBatch / commitOffsets "
        "/ total (ms) | lost / duplicated | CPU s/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for ph in phases:
        lat, tr = ph["latency_ms"], ph["triggers"]
        stages = " / ".join(
            str(tr.get(s, "-"))
            for s in ("latestOffset", "walCommit", "addBatch", "commitOffsets", "triggerExecution")
        )
        lines.append(
            f"| {ph['rate']:,} (achieved {ph['achieved_rate']:,}) | {ph['produced']:,} | "
            f"{lat.get('p50', '-')} ms | {lat.get('p99', '-')} ms | "
            f"{lat.get('max', '-')} ms | {tr['batches']} | "
            f"{tr.get('rows_per_batch', '-')} | {stages} | "
            f"{ph['missing']} / {ph['duplicated']} | {cpu_text(ph['cpu'])} |"
        )
    return "\n".join(lines)


def ramp_table(steps) -> str:
    lines = [
        "| target rate | achieved | lag growth over 10 s | p50 | p99 | rows/batch | "
        "sustained? | CPU s/s |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for st in steps:
        lat = st["latency_ms"]
        lines.append(
            f"| {st['rate']:,} | {st['achieved_rate']:,} | {st['growth_s']:+.2f} s | "
            f"{lat.get('p50', '-')} ms | {lat.get('p99', '-')} ms | "
            f"{st['triggers'].get('rows_per_batch', '-')} | "
            f"{'yes' if st['sustained'] else 'NO'} | {cpu_text(st['cpu'])} |"
        )
    return "\n".join(lines)


def main(argv=None):
    ap = harness.parser(__doc__)
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each fixed-rate run")
    ap.add_argument("--rates", default="1000,20000", help="fixed rates, records/s")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--window", type=float, default=10.0, help="ramp window, seconds")
    ap.add_argument("--ramp-start", type=int, default=20000)
    ap.add_argument("--ramp-factor", type=float, default=1.5)
    ap.add_argument("--ramp-max", type=int, default=1_000_000)
    ap.add_argument("--no-ramp", action="store_true")
    ap.add_argument("--json", default=None, help="write the raw figures here")
    harness.add_write_results(ap, "stream-latency")
    args = ap.parse_args(argv)
    if args.value_size < STAMP.size:
        ap.error(f"--value-size must be at least {STAMP.size}")

    log = harness.log
    started = time.monotonic()
    load_before = harness.load_average()
    bench = LatencyRun(args)
    result = {"args": vars(args), "fixed": [], "ramp": []}
    try:
        log(f"Tansu at {bench.broker.bootstrap_servers}; starting the query")
        bench.start_query()
        log("warm-up: 1,000 records/s for 5 s")
        bench.run_phase(1000, 5.0)
        for rate in (int(r) for r in args.rates.split(",") if r):
            bench.drain()
            log(f"fixed rate {rate:,} records/s for {args.seconds:g} s")
            ph = bench.run_phase(rate, args.seconds)
            log(
                f"  p50 {ph['latency_ms'].get('p50')} ms, p99 {ph['latency_ms'].get('p99')} ms, "
                f"{ph['triggers']}"
            )
            result["fixed"].append(ph)
        rate = args.ramp_start
        while not args.no_ramp and rate <= args.ramp_max:
            if not bench.drain():
                log("the query did not drain in 120 s: ramp ends")
                break
            log(f"ramp: {rate:,} records/s for 2 x {args.window:g} s")
            st = bench.run_phase(rate, 2 * args.window)
            st["sustained"], st["growth_s"] = ramp_verdict(st, args.window, rate)
            log(
                f"  achieved {st['achieved_rate']:,}/s, lag growth {st['growth_s']:+.2f} s, "
                f"sustained: {st['sustained']}"
            )
            result["ramp"].append(st)
            if not st["sustained"]:
                break
            rate = int(round(rate * args.ramp_factor, -3))
    finally:
        bench.close()
    sustained = [st["rate"] for st in result["ramp"] if st["sustained"]]
    result["max_sustained"] = max(sustained) if sustained else None
    result["load_average"] = harness.load_average()
    result["minutes"] = round((time.monotonic() - started) / 60, 1)

    command = harness.command_line("stream_latency.py", argv)
    parts = [
        f"Command: `{command}` -- {harness.stamp()}, "
        f"{result['minutes']} min; pykafka -> pykafka on Tansu, default trigger, "
        f"local[2], {args.partitions} partitions, {args.value_size} B values; load "
        f"average (1 min) {load_before[0]:.2f} at the start, "
        f"{result['load_average'][0]:.2f} at the end.",
        fixed_table(result["fixed"]),
    ]
    if result["ramp"]:
        last = result["ramp"][-1]
        ceiling = (
            f"{result['max_sustained']:,} records/s"
            if result["max_sustained"]
            else "below the first step"
        )
        parts += [
            ramp_table(result["ramp"]),
            f"Sustained maximum rate: **{ceiling}**"
            + ("" if not last["sustained"] else " (the ramp reached --ramp-max)"),
        ]
    print("\n" + "\n\n".join(parts))
    if args.write_results:
        path = harness.RESULTS_MD
        harness.replace_section(
            path,
            "stream-latency",
            "\n\n".join(
                [
                    "## Streaming latency (`stream_latency.py`)",
                    parts[0] + f"  Machine: {harness.machine_and_load()}.",
                    *parts[1:],
                ]
            ),
        )
        print(f"\nwrote the stream-latency section of {os.path.relpath(path)}")
    if args.json:
        for part in result["fixed"] + result["ramp"]:
            part.pop("lag_samples", None)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
