"""Linux /proc readers shared by the suite's support code and the benchmarks
(benchmarks/harness.py re-exports them): a process's stat fields, resident memory and
command line, and a table of every readable process. Every reader raises ``OSError`` for a
process that is gone (or not readable), except :func:`processes`, which skips those."""

from __future__ import annotations

import os
from typing import NamedTuple

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Stat(NamedTuple):
    """The fields of ``/proc/<pid>/stat`` the suite and the benchmarks use."""

    name: str  # the command name, without its parentheses
    state: str  # R, S, D, Z, ...
    ppid: int
    session: int
    cpu_seconds: float  # utime + stime
    start_ticks: int  # since boot, in clock ticks


def stat(pid: int | str = "self") -> Stat:
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text.rsplit(")", 1)[1].split()
    return Stat(
        name=text[text.index("(") + 1 : text.rindex(")")],
        state=fields[0],
        ppid=int(fields[1]),
        session=int(fields[3]),
        cpu_seconds=(int(fields[11]) + int(fields[12])) / CLOCK_TICKS,
        start_ticks=int(fields[19]),
    )


def status_kib(pid: int | str = "self", keys=("VmRSS",)) -> dict[str, int]:
    """``{key: KiB}`` of the ``/proc/<pid>/status`` lines ``keys`` (e.g. VmRSS, VmHWM)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in keys:
                out[key] = int(value.split()[0])
    return out


def rss_bytes(pid: int | str = "self") -> int:
    """Resident memory of one process, bytes (0 for a process without memory, a zombie)."""
    return status_kib(pid).get("VmRSS", 0) * 1024


def cmdline(pid: int | str = "self") -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode(errors="replace")


def pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def processes() -> dict[int, Stat]:
    """``{pid: Stat}`` of every process we may read."""
    out = {}
    for pid in pids():
        try:
            out[pid] = stat(pid)
        except (OSError, ValueError, IndexError):
            continue
    return out


def boot_time() -> int:
    """The machine's boot, epoch seconds (``btime`` of /proc/stat)."""
    with open("/proc/stat") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("btime"))


def started_at(pid: int | str = "self") -> float:
    """A process's start, epoch seconds (10 ms resolution)."""
    return boot_time() + stat(pid).start_ticks / CLOCK_TICKS


def cpu_model() -> str | None:
    """The ``model name`` of /proc/cpuinfo (None where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
