"""Driver-side cost of an exactly-once commit: the check that every task's transaction is
still open (one AddPartitionsToTxn per task, ``exactly_once.check_open``) against the
EndTxn(commit) pass it precedes, on Tansu (which implements transactions and fencing).
Both passes share one client, as ``commit_all`` does, so the check also pays for the
FindCoordinator lookups that the commit then reuses.

Each round opens ``--tasks`` transactions (one record each, as write tasks leave them),
then times the check and the commit of that round; best of ``--rounds`` each. No Spark.

    .venv/bin/python benchmarks/bench_eos_commit.py [--tasks 100] [--rounds 5]
"""

from __future__ import annotations

import time

import harness


def main():
    parser = harness.parser()
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from kafka_ds.client import KafkaClient
    from kafka_ds.options import parse_write_options
    from kafka_ds.write.exactly_once import _end, check_open, handles_of
    from kafka_ds.write.messages import KafkaCommitMessage
    from tests.support.brokers import TansuBroker
    from tests.support.txlog import produce_in_transaction, verdict

    with TansuBroker() as broker:
        bs = broker.bootstrap_servers
        topic = broker.unique_topic("eos-commit")
        broker.create_topic(topic, 12)
        opts = parse_write_options(
            {"kafka.bootstrap.servers": bs, "topic": topic, "deliveryGuarantee": "exactly-once"}
        )
        best = {"check": float("inf"), "commit": float("inf")}
        for round_ in range(args.rounds):
            messages = []
            for task in range(args.tasks):
                partition = task % 12
                handle = produce_in_transaction(
                    bs, topic, f"{topic}-r{round_}-{task}", {partition: [b"v"]}
                )
                messages.append(
                    KafkaCommitMessage(
                        task=task,
                        records=1,
                        bytes=0,
                        partitions=[(topic, partition, 1, -1, -1)],
                        transactional_id=handle.transactional_id,
                        producer_id=handle.producer_id,
                        producer_epoch=handle.producer_epoch,
                    )
                )
            with KafkaClient(bs) as client:  # as commit_all: one client for both passes
                began = time.perf_counter()
                check_open(client, opts, messages)
                checked = time.perf_counter()
                _end(client, opts, handles_of(messages), True)
                done = time.perf_counter()
            best["check"] = min(best["check"], checked - began)
            best["commit"] = min(best["commit"], done - checked)
        committed = len(verdict(bs, topic).committed)
        assert committed == args.tasks * args.rounds, committed
        print(f"{args.tasks} task transactions, Tansu, best of {args.rounds}:")
        print(f"  check (AddPartitionsToTxn per task) {best['check'] * 1000:8.1f} ms")
        print(f"  commit (EndTxn per task)            {best['commit'] * 1000:8.1f} ms")
        print(f"  check / commit                      {best['check'] / best['commit']:8.2f}")


if __name__ == "__main__":
    main()
