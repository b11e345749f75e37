"""The soak's report: the plot (soak.png) and its section of benchmarks/results.md."""

from __future__ import annotations

import collections
import json
from itertools import pairwise

import harness

# --- plot -----------------------------------------------------------------------------------


def plot(path, series, memory, events, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(12, 11), sharex=True)
    ts = [s[0] / 60 for s in series]
    for name in ("files", "kafka"):
        rates = [0.0]
        for a, b in pairwise(series):
            dt = b[0] - a[0]
            rates.append(max(0.0, (b[2][name] - a[2][name]) / dt) if dt > 0 else 0.0)
        # a moving average over 1 minute: batches commit every few seconds
        width = max(1, int(60 / max(1e-9, (series[-1][0] - series[0][0]) / max(1, len(series)))))
        smooth = [
            sum(rates[max(0, i - width + 1) : i + 1]) / len(rates[max(0, i - width + 1) : i + 1])
            for i in range(len(rates))
        ]
        axes[0].plot(ts, smooth, label=f"{name} sink, records/s committed (1 min mean)")
        axes[1].plot(ts, [s[3][name] for s in series], label=f"{name} sink lag (records)")
    produced = [0.0] + [
        (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else 0.0 for a, b in pairwise(series)
    ]
    axes[0].plot(ts, produced, color="grey", alpha=0.4, lw=0.8, label="produced records/s")
    axes[0].set_ylabel("records/s")
    axes[1].set_ylabel("records behind")
    totals = collections.defaultdict(dict)  # role -> t -> MiB (sum over its processes)
    for (role, _pid), pts in memory.items():
        base = role.split(" ")[0] if role.startswith("executor") else None
        key = (
            "executor JVMs"
            if role.endswith("JVM") and base
            else "executor Python workers"
            if base
            else role
        )
        for t, mib in pts:
            totals[key][t] = totals[key].get(t, 0.0) + mib
    for key in sorted(totals):
        pts = sorted(totals[key].items())
        axes[2].plot([t / 60 for t, _ in pts], [m for _, m in pts], label=key)
    axes[2].set_ylabel("RSS MiB (sum per role)")
    axes[2].set_xlabel("minutes")
    colours = {
        "executor_kill": "red",
        "driver_kill": "black",
        "registry_down": "purple",
        "driver_failed": "orange",
        "schema_v2": "green",
    }
    for t, kind, _ in events:
        colour = colours.get(kind)
        if colour:
            for ax in axes:
                ax.axvline(t / 60, color=colour, alpha=0.5, lw=0.8)
    axes[0].set_title(
        title + "\nlines: red executor SIGKILL, black driver SIGKILL, purple "
        "registry down, orange query failed, green schema v2",
        fontsize=9,
    )
    for ax in axes:
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- results.md -------------------------------------------------------------------------------


def _kind(role):
    """'executor 3 JVM' -> 'executor JVMs' (executors are replaced and renumbered)."""
    if role.startswith("Kafka node "):
        return "Kafka node JVMs"
    if role.startswith("executor "):
        return "executor JVMs" if role.endswith("JVM") else "executor Python workers"
    return role


def _short_error(text, limit=320):
    """The kafka_ds error of a driver's failure line, fit for a table cell."""
    at = text.find("kafka_ds.")
    text = text[at:] if at >= 0 else text
    text = text.split(" |  SQLSTATE")[0].replace("|", "/").replace("`", "'")
    return text[:limit] + (" ..." if len(text) > limit else "")


NODE_ROWS = (
    ("leader_kill", "partition leaders SIGKILLed and restarted"),
    ("group_coordinator_kill", "group coordinators (the file query's group) SIGKILLed"),
    ("txn_coordinator_kill", "transaction coordinators SIGKILLed mid-commit (EndTxn held)"),
    ("controller_kill", "active controllers SIGKILLed"),
    ("rolling_restart", "rolling restarts of all three nodes"),
    ("controlled_shutdown", "controlled shutdowns of a leader"),
    ("disk_full", "node 3's log dir filled up"),
    ("node_cut_off", "a node cut off from the clients (its peers still see it)"),
)


def _node_rows(report):
    """The node faults' rows (Apache Kafka runs only)."""
    if "node_faults" not in report or report.get("broker", "Tansu") == "Tansu":
        return []
    counts = report["node_faults"]
    rows = [f"| {label} | {counts.get(kind, 0)} |" for kind, label in NODE_ROWS]
    for full in report.get("disk_full", []):
        rows.append(
            f"| disk full at {full['t'] / 60:.0f} min: what Kafka did | "
            + ("the node exited" if full["node_exited"] else "the node stayed up")
            + (f": `{full['log_lines'][0][:200]}`" if full["log_lines"] else "")
            + f"; whole again after the restart: {full.get('healed')} |"
        )
    failed = report.get("node_fault_failures") or []
    rows.append(
        f"| node faults not made, or the cluster not whole after one | {len(failed)}"
        + "".join(f"; `{f['what'][:200]}`" for f in failed)
        + " |"
    )
    return rows


def results_markdown(report, command, png="soak.png") -> str:
    """The soak's section of benchmarks/results.md from its summary."""
    k, f = report["kafka_sink"], report["file_sink"]
    raw, rc = k.get("raw_log", {}), k.get("read_committed_consumer", {})
    faults = report["network_faults"]
    stalls = {name[6:]: n for name, n in faults.items() if name.startswith("stall_")}
    events = report["process_events"]
    failures = report["query_failures"]
    lso = k.get("last_stable_offset", {}).get("partitions_lso_below_hw", {})
    memory = collections.defaultdict(
        lambda: {"processes": 0, "life": 0, "peak": 0.0, "growth": None, "longest": None}
    )
    for role, m in report["memory"].items():
        agg = memory[_kind(role)]
        agg["processes"] += m["processes"]
        agg["peak"] = max(agg["peak"], m["peak_mib"])
        if m["longest_life_s"] > agg["life"]:
            agg["life"] = m["longest_life_s"]
            agg["longest"] = m
        if m["max_growth_mib_per_h"] is not None:
            agg["growth"] = max(
                agg["growth"] if agg["growth"] is not None else -1e9, m["max_growth_mib_per_h"]
            )
    load = report["load_average_at_start"], report["load_average_at_end"]
    kills = [e for e in report.get("events", []) if e[1] == "driver_kill"]
    mid_commit = sum("mid-commit" in str(e[2]) for e in kills)
    before_outage = sum("registry" in str(e[2]) for e in kills)
    lines = [
        "## Soak (`soak.py`): typed, exactly-once, two executor JVMs, everything failing",
        "",
        f"Command: `{command}`"
        + (f", finished {report['finished_utc']}" if report.get("finished_utc") else "")
        + f"; {report['production_s'] / 60:.0f} min of production and "
        f"faults, then {report['catch_up_s']} s of catch-up; {report['args']['master']}, "
        f"{report.get('broker', 'Tansu')} behind the fault proxy, seed {report['seed']}. "
        "Load average "
        f"{load[0][0]:.1f} at the start, {load[1][0]:.1f} at the end (2 cores, shared).",
        "",
        "| | |",
        "|---|---|",
        f"| records produced (acknowledged) | {report['records_produced']:,} at "
        f"{report['args']['rate']}/s into {report['args']['partitions']} partitions "
        f"(Avro; writer schema version 2 from record {report['v2_from_record_id']:,}) |",
        *(
            [
                f"| delivered without an offset (librdkafka's idempotent retry of a batch the "
                f"broker had), found by id in the file sink | "
                f"{report['without_offset']['delivered_without_offset']}, "
                f"{report['without_offset']['found_in_the_file_sink']} |"
            ]
            if report.get("without_offset", {}).get("delivered_without_offset")
            else []
        ),
        f"| broker outages (proxy down) | {faults.get('broker_outages', 0)}, "
        f"{faults.get('broker_down_s', 0)} s down in all |",
        f"| answers stalled 1-{report['args']['stall_max']:.0f} s | "
        + ", ".join(f"{name} {n}" for name, n in sorted(stalls.items()))
        + " |",
        f"| executor JVMs SIGKILLed mid-batch | {events.get('executor', 0)} |",
        f"| driver sessions SIGKILLed | {events.get('driver', 0)}: {mid_commit} mid-commit (an "
        f"EndTxn answer held), {before_outage} right before a long registry outage |",
        f"| registry outages shorter / longer than the {report['args']['budget_ms'] // 1000} s "
        f"budget | {events.get('registry_short', 0)} / {events.get('registry_long', 0)} |",
        *_node_rows(report),
        f"| queries failed (restarted from the checkpoints) | {len(failures)}"
        + "".join(f"; at {x['t'] / 60:.0f} min: `{_short_error(x['error'])}`" for x in failures)
        + " |",
        f"| stuck queries | {len(report['stuck'])} |",
        f"| driver starts | {report['driver_starts']} |",
        f"| file sink: rows, **lost**, **duplicated** | {f.get('rows', '?'):,}, "
        f"**{f.get('lost', '?')}**, **{f.get('duplicated', '?')}** (every acknowledged "
        "(partition, offset) once; ids match) |",
        f"| `pykafka` sink, committed transactions of the raw log: records, **lost**, "
        f"**duplicated**, aborted, **open** | {raw.get('committed_records', '?'):,}, "
        f"**{raw.get('lost')}**, **{raw.get('duplicated')}**, {raw.get('aborted_records')}, "
        f"**{raw.get('open_records')}** ({raw.get('commit_markers')} commits; decoded by "
        "confluent-kafka's AvroDeserializer, ids match; "
        f"{raw.get('records_with_v2_field_set', 0):,} carry the version-2 field) |",
        f"| `read_committed` consumer (confluent-kafka): records, lost, duplicated | "
        f"{rc.get('records', '?'):,}, {rc.get('lost')}, {rc.get('duplicated')} "
        "(reached the high watermark of every partition) |"
        if all(
            pos >= hw - 1 for pos, hw in rc.get("last_offset_read_vs_high_watermark", {}).values()
        )
        else f"| `read_committed` consumer (confluent-kafka): records, lost, duplicated | "
        f"{rc.get('records', '?')}, {rc.get('lost')}, {rc.get('duplicated')} (stopped before "
        f"the high watermark: {rc.get('last_offset_read_vs_high_watermark')}) |",
        f"| last stable offset == high watermark | "
        f"{'every partition' if not lso else 'NOT: ' + json.dumps(lso)} |",
        f"| mean throughput, records/s | produced {report['throughput_records_per_s']['produced_mean']}, "
        f"committed (over the whole run) files {report['throughput_records_per_s']['files_committed_mean']}, "
        f"Kafka {report['throughput_records_per_s']['kafka_committed_mean']} |",
        f"| largest lag, records | files {report['max_lag_records']['files']:,}, Kafka "
        f"{report['max_lag_records']['kafka']:,} |",
        "",
        "Memory (RSS from /proc every 5 s; growth: least-squares line over a process's "
        "life after its first 2 minutes, for processes that lived at least 7 minutes):",
        "",
        "| process | processes seen | longest life | longest-lived: first -> last MiB | "
        "peak MiB | growth MiB/h (longest-lived) | largest growth MiB/h |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for kind in sorted(memory):
        agg = memory[kind]
        m = agg["longest"]
        lines.append(
            f"| {kind} | {agg['processes']} | {agg['life'] / 60:.0f} min | "
            f"{m['longest_first_mib']} -> {m['longest_last_mib']} | {agg['peak']} | "
            f"{m['longest_growth_mib_per_h'] if m['longest_growth_mib_per_h'] is not None else '--'} | "
            f"{agg['growth'] if agg['growth'] is not None else '--'} |"
        )
    lines += ["", f"![soak: throughput, lag and memory over time]({png})", ""]
    return "\n".join(lines)


def write_results(report, command):
    harness.replace_section(harness.RESULTS_MD, "soak", results_markdown(report, command.strip()))
