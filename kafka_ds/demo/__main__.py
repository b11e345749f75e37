"""``python -m kafka_ds.demo``: the main job (``job.py``), on a local Tansu broker it starts
and stops itself (``broker.py``) or on the broker given with ``--bootstrap``."""

from __future__ import annotations

import argparse
import contextlib
import sys

from .job import run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_ds.demo",
        description="A real round trip through a Kafka-compatible broker: write rows with "
        "df.write.format('pykafka'), read them back, stream them, check every row "
        "and the consumer group's offsets.",
    )
    parser.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="use this Kafka instead of starting a local Tansu broker",
    )
    parser.add_argument("--rows", type=int, default=10000, help="rows to write (default 10000)")
    args = parser.parse_args(argv)
    if args.bootstrap:
        return run(args.bootstrap, args.rows)
    from .broker import LocalBroker

    with contextlib.ExitStack() as stack:
        bootstrap = stack.enter_context(LocalBroker())
        print(f"started a local Tansu broker on {bootstrap}")
        return run(bootstrap, args.rows)


if __name__ == "__main__":
    sys.exit(main())
