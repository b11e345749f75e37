"""Soak: a typed, exactly-once stream on two executor JVMs while everything fails.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/soak.py              # 30 min
    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/soak.py --minutes 60

One command, not in the default test run. It starts, on this machine:

* Kafka (``--broker``): by default Apache Kafka, three KRaft nodes (benchmarks/
  soak_cluster.py on tests/support/apache_kafka.py: RF 3, ``min.insync.replicas=2``, node
  3's log dir a tmpfs of ``--disk-mib``); or Tansu (``--broker tansu``). A source and a
  sink topic; Spark reaches every node only through its own listener of the TCP fault
  proxy (tests/support/faultproxy.py); the nodes reach each other directly;
* a Schema Registry (``--registry``): Apicurio Registry (tests/support/apicurio.py, a
  JVM with in-memory storage) behind a TCP outage proxy (tests/support/outage_proxy.py:
  an outage cuts the connections and refuses new ones while the server and its schemas
  stay), the default; or the fake (tests/support/schema_registry.py, HTTP, in this
  process: an outage stops its listener);
* a producer thread: confluent-kafka's ``Producer`` (idempotent, acks=all, straight to
  the nodes) writing ``--rate`` records/s of Avro values framed by confluent-kafka's
  ``AvroSerializer`` (subject ``<source>-value``, version 1); at about 40 % of the run it
  switches to version 2 (an added field ``unit`` with a default: a compatible evolution),
  registered then. Every acknowledged (partition, offset) is remembered;
* the Spark driver (benchmarks/_soak_eos_child.py, in a session of its own) on
  ``local-cluster[2,1,1024]``: two executor JVMs. Two queries read the source with
  ``valueFormat=avro``; one writes ``partition, offset, value.*`` to a parquet file sink,
  the other ``struct(src_partition, src_offset, value.*)`` typed (``valueFormat=avro``) with
  ``deliveryGuarantee=exactly-once`` to the sink topic.

Faults, all through the run:

* network (a thread, every ~``--fault-every`` s): a broker outage of 2..``--down-max`` s
  (the proxy cuts every connection and refuses new ones), or one answer of Fetch, Produce,
  Metadata, ListOffsets, FindCoordinator, InitProducerId, AddPartitionsToTxn or EndTxn
  stalled 1..``--stall-max`` s (past the 30 s request timeout at the top);
* processes and the registry (events spread over the run, in turn):
  SIGKILL of one executor JVM while a micro-batch runs (its checkpoint has an offsets
  entry without a commit); SIGKILL of the driver's whole session while its commit holds
  (the proxy holds an EndTxn answer: the broker committed one transaction of the batch,
  the driver has not finished), then a restart from the checkpoints; a Schema Registry
  outage shorter than ``schema.registry.retry.budget.ms`` (``--budget-ms``) right after a
  new executor started (its Python workers look the writer schemas up); an outage longer
  than the budget while the driver restarts (its planning looks the reader schema up) or
  an executor is replaced. A query that fails is restarted from its checkpoints and
  counted, with its error;
* nodes (Apache Kafka, in the same turn; each waits until every partition has three
  in-sync replicas again): SIGKILL and restart of a partition's leader, of the file
  query's consumer group coordinator, of the transaction coordinator while the proxy holds
  its EndTxn answer (mid-commit), of the active controller; a rolling restart (SIGTERM)
  of all three; a controlled shutdown of a leader; node 3's log dir filled up (a filler
  file on its tmpfs; the node is restarted once the file is gone); one node cut off from
  the clients by the proxy (``isolate``) while its peers still see it;
* a query that commits no batch for ``--stuck-s`` s while records wait is a stuck query:
  counted, killed and restarted.

At the end the faults stop, the registry and the proxy are up, production stops, and the
driver runs until both queries have committed every record, then stops them. Checked:

* the file sink (the files its ``_spark_metadata`` log committed) holds every acknowledged
  (partition, offset) exactly once;
* the sink topic: every acknowledged source record exactly once among the committed
  transactions of the raw log (tests/support/txlog.py applies Kafka's rule), values
  decoded by confluent-kafka's ``AvroDeserializer`` (the source record's id must match),
  and no transaction open; also a confluent-kafka consumer with
  ``isolation.level=read_committed``: what it returns and whether it reaches the high
  watermark (read once every last stable offset is its high watermark; Tansu sends no
  aborted-transactions list, so there that reader also returns aborted records);
* memory: RSS from /proc every ``--sample-every`` s of the driver JVM, the driver's Python
  process and its Python workers, each executor JVM and its Python workers, and this
  process; growth per hour by a least-squares line over each process's life (after its
  first 2 minutes).

Writes ``soak_summary.json`` (also printed) and ``soak.png`` (throughput, lag and memory
over time) into ``--out-dir`` (default: this folder). Exit status 1 if anything was lost or
duplicated, a transaction was left open, or the queries did not catch up.
"""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time

import harness
from soak_check import check_file_sink, check_kafka_sink, resolve_without_offset
from soak_cluster import NODE_FAULTS, NodeFaults, start_cluster, stop_cluster
from soak_common import END_TXN, HERE, log, now
from soak_processes import (
    Driver,
    checkpoint_state,
    executor_pids,
    proc_table,
    python_under,
    session_pids,
)
from soak_report import plot, write_results
from soak_sampling import Sampler, memory_summary
from soak_workload import NetworkFaults, SoakRegistry, SourceProducer

# --- the run ----------------------------------------------------------------------------------


def main(argv=None):
    parser = harness.parser(__doc__)
    parser.add_argument("--minutes", type=float, default=30.0, help="faults and production")
    parser.add_argument("--rate", type=int, default=200, help="records/s produced")
    parser.add_argument("--broker", choices=("kafka", "tansu"), default="kafka")
    parser.add_argument("--disk-mib", type=int, default=1024, help="node 3's log dir (tmpfs)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--trigger-ms", type=int, default=5000)
    parser.add_argument("--max-offsets", type=int, default=5000)
    parser.add_argument("--fault-every", type=float, default=30.0, help="s between network faults")
    parser.add_argument("--down-max", type=float, default=20.0)
    parser.add_argument("--stall-max", type=float, default=40.0)
    parser.add_argument(
        "--budget-ms",
        type=int,
        default=20000,
        help="schema.registry.retry.budget.ms of the queries",
    )
    parser.add_argument("--txn-timeout-ms", type=int, default=180000)
    parser.add_argument(
        "--registry",
        choices=("apicurio", "fake"),
        default="apicurio",
        help="the Schema Registry: Apicurio behind an outage proxy, or the project's fake",
    )
    parser.add_argument(
        "--event-every",
        type=float,
        default=None,
        help="s between process/registry events' starts (default: minutes*60/10)",
    )
    parser.add_argument(
        "--plan",
        default="executor_kill,registry_short,driver_kill,"
        "registry_long_driver,executor_kill,driver_kill,registry_long_executor",
        help="the process/registry events, in turn",
    )
    parser.add_argument("--node-faults", default=",".join(NODE_FAULTS), help="in turn")
    parser.add_argument("--node-fault-every", type=float, help="s (default: run/17)")
    parser.add_argument("--stuck-s", type=float, default=600.0)
    parser.add_argument("--catch-up-s", type=float, default=1800.0)
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out-dir", default=HERE)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    harness.add_write_results(parser, "soak")
    parser.add_argument(
        "--results-from",
        metavar="SUMMARY_JSON",
        help="only write results.md's section from an earlier run's summary",
    )
    args = parser.parse_args(argv)
    command = "PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/soak.py " + " ".join(
        a
        for a in (argv if argv is not None else sys.argv[1:])
        if not a.startswith("--results-from") and not a.endswith(".json")
    )
    if args.results_from:
        with open(args.results_from) as f:
            report = json.load(f)
        command = report.get("command", command)
        write_results(report, command)
        return 0
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)

    from tests.support import spark_home
    from tests.support.brokers import TansuBroker
    from tests.support.faultproxy import FaultProxy

    spark_home.install()

    work = tempfile.mkdtemp(prefix="kafka_ds-soak-")
    events = []  # (t, kind, detail)
    kafka = args.broker == "kafka"
    broker = start_cluster(args.disk_mib) if kafka else TansuBroker()
    registry = SoakRegistry(args.registry)
    proxy = producer = faults = sampler = driver = None
    report = {
        "seed": seed,
        "work_dir": work,
        "args": vars(args),
        "load_average_at_start": harness.load_average(),
        "registry": registry.name,
        "broker": f"Apache Kafka {broker.version}, 3 nodes" if kafka else "Tansu",
    }
    budget_s = args.budget_ms / 1000.0
    registry_down = {"since": None}

    outages = []

    def registry_stop(seconds, why):
        registry.stop()
        registry_down["since"] = now()
        events.append((now(), "registry_down", f"{seconds:.0f} s ({why})"))
        outages.append({"t": now(), "seconds": round(seconds, 1), "why": why})
        log(f"registry down for {seconds:.0f} s ({why})")

    def registry_start():
        registry.start()
        registry_down["since"] = None
        outage = outages[-1]
        before = registry.requests()

        def count_after():  # lookups that waited through the outage come in right after it
            outage["requests_in_60_s_after"] = registry.requests() - before

        threading.Timer(60, count_after).start()
        log("registry up")

    try:
        source, sink = f"soak-src-{seed}", f"soak-sink-{seed}"
        broker.create_topic(source, partitions=args.partitions)
        broker.create_topic(sink, partitions=args.partitions)
        proxy = FaultProxy(broker.bootstrap_servers)
        spec = {
            "master": args.master,
            "bootstrap": proxy.bootstrap_servers,
            "registry": registry.url,
            "budget_ms": args.budget_ms,
            "source": source,
            "sink_topic": sink,
            "file_sink": os.path.join(work, "files"),
            "file_checkpoint": os.path.join(work, "ck-files"),
            "kafka_checkpoint": os.path.join(work, "ck-kafka"),
            "trigger_ms": args.trigger_ms,
            "max_offsets": args.max_offsets,
            "txn_timeout_ms": args.txn_timeout_ms,
            "stop_file": os.path.join(work, "STOP"),
            "group": f"soak-files-{seed}" if kafka else None,
        }
        checkpoints = {"files": spec["file_checkpoint"], "kafka": spec["kafka_checkpoint"]}
        producer = SourceProducer(
            broker.bootstrap_servers, registry.url, source, args.partitions, args.rate
        )
        producer.start()
        driver = Driver(spec, work)
        driver.start()
        nodes = (
            (lambda: {n.java_pid: f"Kafka node {n.node_id} JVM" for n in broker.nodes})
            if kafka
            else None
        )
        sampler = Sampler(args.sample_every, driver, producer, checkpoints, source, nodes)
        sampler.start()
        faults = NetworkFaults(proxy, args.fault_every, args.down_max, args.stall_max, rng, events)
        faults.start()

        run_s = args.minutes * 60
        plan = args.plan.split(",")
        every = args.event_every or max(60.0, run_s / 10)
        hold_lock = threading.Lock()  # one EndTxn answer held at a time
        node_faults = NodeFaults(
            broker,
            proxy,
            [source, sink],
            spec["group"],
            seed + 1,
            events,
            args.node_faults.split(",") if kafka and args.node_faults else [],
            args.node_fault_every or max(20.0, run_s / 17),
            run_s,
            hold_lock,
        )
        node_faults.start()
        next_event = every * rng.uniform(0.6, 1.0)
        v2_at = run_s * 0.4
        event_no = 0
        stuck = []

        def watch(until, stop_on_exit=False):
            """Supervise the driver until ``until`` (seconds since start): restart it when it
            exits by itself, and a query that is stuck."""
            while now() < until:
                if not driver.alive:
                    driver.note_exit()
                    events.append((now(), "driver_failed", driver.failures[-1]["error"][:200]))
                    if registry_down["since"] is not None:
                        # waits for the registry to come back (a long outage) before a restart
                        while registry_down["since"] is not None and now() < until:
                            time.sleep(1)
                    time.sleep(5)
                    driver.start()
                    for name in sampler.last_progress:
                        sampler.last_progress[name] = (now(), sampler.last_progress[name][1])
                    continue
                if sampler.series:
                    lag = sampler.series[-1][3]
                    for name, (since, batch) in sampler.last_progress.items():
                        if lag.get(name, 0) > 0 and now() - since > args.stuck_s:
                            detail = (
                                f"query {name} committed no batch for {now() - since:.0f} s "
                                f"(last batch {batch}, lag {lag[name]})"
                            )
                            log("STUCK: " + detail)
                            stuck.append(
                                {
                                    "t": now(),
                                    "detail": detail,
                                    "driver_log_tail": driver.output()[-3000:],
                                }
                            )
                            events.append((now(), "stuck", detail))
                            driver.kill()
                            driver.start()
                            for n in sampler.last_progress:
                                sampler.last_progress[n] = (now(), sampler.last_progress[n][1])
                            break
                time.sleep(1)

        def wait_for(predicate, timeout):
            deadline = now() + timeout
            while now() < deadline:
                if predicate():
                    return True
                watch(now() + 1)
            return False

        def batch_running():
            return any(checkpoint_state(c, source)[2] for c in checkpoints.values())

        def kill_executor(why):
            if not wait_for(
                lambda: (
                    driver.alive
                    and driver.started()
                    and batch_running()
                    and executor_pids(driver.proc.pid)
                ),
                180,
            ):
                log(f"no running batch to kill an executor in ({why})")
                return None
            pids = executor_pids(driver.proc.pid)
            pid = rng.choice(pids)
            os.kill(pid, signal.SIGKILL)
            events.append((now(), "executor_kill", f"pid {pid} ({why})"))
            log(f"SIGKILL executor JVM {pid} mid-batch ({why})")
            return pid

        def wait_new_executor_python(old, timeout=300):
            """Until a Python worker of an executor JVM not in ``old`` runs (its first task:
            it is about to look the writer schemas up)."""

            def ready():
                if not driver.alive:
                    return False
                new = set(executor_pids(driver.proc.pid)) - old
                return bool(new and python_under(new, driver.proc.pid))

            return wait_for(ready, timeout)

        def executor_then_registry_outage(length, draw_seconds, why, counter):
            """SIGKILL an executor, then stop the registry for ``draw_seconds()`` (drawn
            after the kill, as the seed's schedule has it) while the new executor's Python
            workers look the writer schemas up."""
            old = set(executor_pids(driver.proc.pid)) if driver.alive else set()
            if kill_executor(f"then a {length} registry outage") is None:
                return
            kills["executor"] += 1
            wait_new_executor_python(old)
            seconds = draw_seconds()
            registry_stop(seconds, why)
            watch(now() + seconds)
            registry_start()
            kills[counter] += 1

        def wait_driver_planning(timeout=300):
            """Until the new driver starts its first Python data source worker (before it
            looks the reader schema up)."""

            def ready():
                if not driver.alive:
                    return False
                table = proc_table()
                return any(
                    "pyspark.sql.worker" in table[p][3]
                    for p in session_pids(driver.proc.pid, table)
                )

            return wait_for(ready, timeout)

        kills = collections.Counter()
        while now() < run_s:
            watch(min(run_s, next_event if v2_at is None else min(next_event, v2_at)))
            if now() >= run_s:
                break
            if v2_at is not None and now() >= v2_at:
                producer.switch_to_v2()
                events.append((now(), "schema_v2", "writer schema version 2 registered"))
                log("schema version 2 registered; the producer writes it from now on")
                v2_at = None
                continue
            kind = plan[event_no % len(plan)]
            event_no += 1
            next_event = now() + every * rng.uniform(0.7, 1.3)
            log(f"event {event_no}: {kind}")
            if kind == "executor_kill":
                if kill_executor("plain") is not None:
                    kills["executor"] += 1
            elif kind == "registry_short":
                executor_then_registry_outage(
                    "short",
                    lambda: budget_s * rng.uniform(0.25, 0.6),
                    "shorter than the budget, new executor starting",
                    "registry_short",
                )
            elif kind == "driver_kill":
                if not wait_for(lambda: driver.alive and driver.started(), 300):
                    log("driver not running: no mid-commit kill")
                    continue
                with hold_lock:
                    proxy.inject(END_TXN, "hold")
                    held = wait_for(lambda: proxy.wait_held(0), 300)
                    proxy.clear_faults()
                    driver.kill()
                kills["driver"] += 1
                events.append(
                    (
                        now(),
                        "driver_kill",
                        "mid-commit (EndTxn answer held)" if held else "no commit seen",
                    )
                )
                log(f"SIGKILL driver session {'mid-commit' if held else '(no commit held)'}")
                driver.start()
            elif kind == "registry_long_driver":
                seconds = budget_s + rng.uniform(15, 30)
                driver.kill()
                kills["driver"] += 1
                events.append((now(), "driver_kill", "before a long registry outage"))
                driver.start()
                wait_driver_planning()
                registry_stop(seconds, "longer than the budget, driver restarting")
                watch(now() + seconds)
                registry_start()
                kills["registry_long"] += 1
            elif kind == "registry_long_executor":
                executor_then_registry_outage(
                    "long",
                    lambda: budget_s + rng.uniform(15, 30),
                    "longer than the budget, executor replaced",
                    "registry_long",
                )
        # --- the end: faults off, production off, catch up -----------------------------------
        log("faults and production stop; catching up")
        faults.stopping.set()
        faults.join(120)
        proxy.clear_faults()
        proxy.up()
        node_faults.stopping.set()
        node_faults.join(900)
        if kafka:
            node_faults.heal()
        if registry_down["since"] is not None:
            registry_start()
        producer.stopping.set()
        producer.join(900)
        ends = producer.end_offsets()
        produced_total = producer.acked()
        report["production_s"] = now()

        def caught_up():
            for checkpoint in checkpoints.values():
                _, offsets, _ = checkpoint_state(checkpoint, source)
                if any(offsets.get(p, 0) < ends[p] for p in range(args.partitions)):
                    return False
            return True

        caught = wait_for(caught_up, args.catch_up_s)
        report["catch_up_s"] = round(now() - report["production_s"])
        open(spec["stop_file"], "w").close()
        stopped = False
        deadline = now() + 300
        while now() < deadline and driver.alive:
            time.sleep(1)
        if driver.alive:
            driver.kill()
        else:
            stopped = "STOPPED" in driver.output()
            if not stopped:
                driver.note_exit()
        sampler.stopping.set()
        sampler.join(30)
        sampler.sample()
        report["seconds"] = now()
        report["load_average_at_end"] = harness.load_average()
        log(f"caught up: {caught}; checking")

        acked = producer.acknowledged()
        import traceback

        unknown = producer.without_offset
        report["without_offset"] = resolve_without_offset(spec["file_sink"], acked, unknown)
        file_result = check_file_sink(spec["file_sink"], acked)
        try:
            kafka_result = check_kafka_sink(
                broker.bootstrap_servers, registry.url, sink, args.partitions, acked
            )
        except Exception:  # noqa: BLE001
            kafka_result = {
                "check_failed": traceback.format_exc(),
                "raw_log": {"lost": -1, "duplicated": -1, "open_records": -1, "value_mismatch": -1},
            }
        first_t, last_t = sampler.series[0][0], report["production_s"]
        committed_by_end = {name: sampler.series[-1][2][name] for name in checkpoints}
        max_lag = {name: max(s[3][name] for s in sampler.series) for name in checkpoints}
        report.update(
            {
                "caught_up": caught,
                "stopped_cleanly": stopped,
                "records_produced": produced_total,
                "producer_failures": producer.failed,
                "producer_errors": dict(producer.errors),
                "v2_from_record_id": producer.v2_from_id,
                "throughput_records_per_s": {
                    "produced_mean": round(produced_total / max(1.0, last_t - first_t), 1),
                    **{
                        f"{n}_committed_mean": round(
                            committed_by_end[n] / max(1.0, report["seconds"] - first_t), 1
                        )
                        for n in checkpoints
                    },
                },
                "max_lag_records": max_lag,
                "network_faults": dict(faults.counts),
                "process_events": dict(kills),
                "node_faults": dict(node_faults.counts),
                "node_fault_failures": node_faults.failures,
                "disk_full": node_faults.disk_outcomes,
                "registry_outages": outages,
                "driver_starts": driver.starts,
                "driver_kills_by_soak": driver.kills,
                "query_failures": driver.failures,
                "stuck": stuck,
                "file_sink": file_result,
                "kafka_sink": kafka_result,
                "memory": memory_summary(sampler.memory),
                "events": events,
            }
        )
        raw = kafka_result["raw_log"]
        ok = (
            "check_failed" not in file_result
            and "check_failed" not in kafka_result
            and caught
            and file_result["lost"] == 0
            and file_result["duplicated"] == 0
            and file_result["value_mismatch"] == 0
            and raw["lost"] == 0
            and raw["duplicated"] == 0
            and raw["open_records"] == 0
            and raw["value_mismatch"] == 0
            and not stuck
            and report["without_offset"]["found_in_the_file_sink"] == len(unknown)
        )
        report["ok"] = ok
        report["command"] = command
        report["finished_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "soak_summary.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)
        title = (
            f"soak {report['seconds'] / 60:.0f} min, {produced_total:,} records, "
            f"seed {seed}, {args.master}"
        )
        plot(os.path.join(args.out_dir, "soak.png"), sampler.series, sampler.memory, events, title)
        print(json.dumps({k: v for k, v in report.items() if k != "events"}, default=str))
        if args.write_results:
            write_results(report, command)
        return 0 if ok else 1
    finally:
        if driver is not None and driver.alive:
            driver.kill()
        for thread in (faults, sampler, producer):
            if thread is not None:
                thread.stopping.set()
        if proxy is not None:
            proxy.close()
        registry.close()
        stop_cluster(broker) if kafka else broker.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
