"""What the benchmarks share: the project root on ``sys.path`` (so that a script run as
``python benchmarks/<name>.py`` imports ``kafka_ds`` and ``tests.support``), common
arguments, the machine and load header, writing ``results.md`` sections and JSON, and /proc
sampling (``tests/support/procfs.py``, shared with the suite). Each benchmark keeps only its
measurement."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.support import procfs  # noqa: E402  (needs ROOT on sys.path)
from tests.support.procfs import processes  # noqa: E402, F401  (re-exported)

RESULTS_MD = os.path.join(HERE, "results.md")

# --- arguments ---------------------------------------------------------------------------


def parser(doc: str | None = None, paragraph: bool = False, **kwargs) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` described by the first line (or ``paragraph``: the first
    paragraph) of the script's docstring."""
    doc = (doc or "").strip()
    return argparse.ArgumentParser(
        description=doc.split("\n\n")[0] if paragraph else doc.split("\n")[0], **kwargs
    )


def add_write_results(ap: argparse.ArgumentParser, section: str) -> None:
    ap.add_argument(
        "--write-results",
        action="store_true",
        help=f"put the figures into benchmarks/results.md (section {section!r})",
    )


def command_line(script: str, argv=None) -> str:
    """The command that ran this benchmark, as results.md quotes it."""
    args = argv if argv is not None else sys.argv[1:]
    return " ".join([f".venv/bin/python benchmarks/{script}", *args])


def log(msg: str) -> None:
    """A progress line on stderr, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


#: names of the Kafka requests the benchmarks count (at a socket or at the fault proxy), by
#: API key
API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    18: "ApiVersions",
    19: "CreateTopics",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    26: "EndTxn",
}


# --- timing --------------------------------------------------------------------------------


def timed(fn) -> float:
    """Wall seconds of one ``fn()``."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def best_of(repeat: int, fn, warmup: bool = False) -> float:
    """The fastest of ``repeat`` runs of ``fn()``, wall seconds (``warmup``: one untimed
    run first)."""
    if warmup:
        fn()
    return min(timed(fn) for _ in range(repeat))


# --- the machine and its load ------------------------------------------------------------


def load_average() -> tuple[float, float, float]:
    return os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3


def describe_load(load=None) -> str:
    return " ".join(f"{x:.2f}" for x in (load or load_average()))


def versions() -> str:
    import numpy
    import pyarrow
    import pyspark

    return (
        f"Python {platform.python_version()}, numpy {numpy.__version__}, "
        f"pyarrow {pyarrow.__version__}, pyspark {pyspark.__version__}"
    )


def machine() -> str:
    """Cores, CPU model and versions, e.g. for results.md's header."""
    cpu = procfs.cpu_model() or platform.processor() or platform.machine()
    return f"{os.cpu_count()} cores ({cpu}), {versions()}"


def machine_and_load() -> str:
    """:func:`machine` and the load average (1 min) now: results.md's header, written at the
    end of a run."""
    return f"{machine()}; load average at the end {load_average()[0]:.1f}"


def stamp() -> str:
    return f"{datetime.datetime.now():%Y-%m-%d %H:%M}"


# --- results -----------------------------------------------------------------------------

# Results of benchmarks run on their own (e.g. bench_pushdown.py at 10M records) follow this
# line in results.md; a new run_all.py run keeps them.
KEPT_MARKER = "<!-- Below: benchmarks run on their own; run_all.py keeps this part. -->"


def kept_sections(path: str = RESULTS_MD) -> str:
    """The part of an existing results file from KEPT_MARKER on ("" if none)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return ""
    at = text.find(KEPT_MARKER)
    return "" if at < 0 else "\n" + text[at:]


def replace_section(path: str, name: str, text: str) -> None:
    """Put ``text`` into results.md's kept part (after KEPT_MARKER) between the comments
    ``<!-- section: name -->`` and ``<!-- end of section: name -->``, replacing what was
    there (appended at the end the first time)."""
    begin, end = f"<!-- section: {name} -->", f"<!-- end of section: {name} -->"
    try:
        with open(path) as f:
            whole = f.read()
    except FileNotFoundError:
        whole = "# Benchmark results\n"
    if KEPT_MARKER not in whole:
        whole = whole.rstrip("\n") + f"\n\n{KEPT_MARKER}\n"
    block = f"{begin}\n{text.strip()}\n{end}"
    at, stop = whole.find(begin), whole.find(end)
    if at >= 0 and stop > at:
        whole = whole[:at] + block + whole[stop + len(end) :]
    else:
        whole = whole.rstrip("\n") + f"\n\n{block}\n"
    with open(path, "w") as f:
        f.write(whole if whole.endswith("\n") else whole + "\n")


def write_json(path: str, data) -> None:
    with open(path, "w") as f:
        json.dump(data, f, default=str, indent=1)


def relative(path: str) -> str:
    return os.path.relpath(path, ROOT)
