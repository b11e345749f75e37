"""The soak's sampler: RSS of every process of the driver's session, production, commits
and lag, every few seconds; memory growth per hour."""

from __future__ import annotations

import collections
import os
import threading

from soak_common import log, now
from soak_processes import checkpoint_state, classify, proc_table

# --- sampling ---------------------------------------------------------------------------------


class Sampler(threading.Thread):
    def __init__(self, every, driver, producer, checkpoints, topic, extra=None):
        super().__init__(daemon=True, name="sampler")
        self.extra = extra  # () -> {pid: role} of more processes (the Kafka nodes)
        self.every, self.driver, self.producer = every, driver, producer
        self.checkpoints, self.topic = checkpoints, topic
        self.memory = collections.defaultdict(list)  # (role, pid) -> [(t, MiB)]
        self.series = []  # (t, produced, {query: committed records}, {query: lag})
        self.stopping = threading.Event()
        self.last_progress = {name: (now(), -1) for name in checkpoints}

    def sample(self):
        t = now()
        table = proc_table()
        session = self.driver.proc.pid if self.driver.alive else None
        roles = classify(session, table) if session else {os.getpid(): "soak process"}
        roles.update(self.extra() if self.extra else {})
        for pid, role in roles.items():
            if pid in table:
                self.memory[(role, pid)].append((t, table[pid][2] / 1024.0))
        ends = self.producer.end_offsets()
        produced = sum(ends)
        committed, lag = {}, {}
        for name, checkpoint in self.checkpoints.items():
            last, offsets, _ = checkpoint_state(checkpoint, self.topic)
            done = sum(offsets.values())
            committed[name] = done
            lag[name] = max(0, produced - done)
            if last != self.last_progress[name][1]:
                self.last_progress[name] = (t, last)
        self.series.append((t, produced, committed, lag))

    def run(self):
        while not self.stopping.wait(self.every):
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - a process that went away mid-read
                log(f"sampler: {exc!r}")


def growth(points, skip_s=120.0):
    """MiB/hour of a least-squares line through the points after the first ``skip_s``."""
    import numpy as np

    if not points:
        return None
    start = points[0][0]
    pts = [(t, m) for t, m in points if t - start >= skip_s]
    if len(pts) < 10 or pts[-1][0] - pts[0][0] < 300:
        return None
    t = np.array([p[0] for p in pts]) / 3600.0
    m = np.array([p[1] for p in pts])
    return float(np.polyfit(t, m, 1)[0])


def memory_summary(memory) -> dict:
    """Per role: processes seen, the longest-lived one's life, first/last/peak RSS and growth
    per hour; the largest growth of any process of the role that lived >= 7 minutes."""
    by_role = collections.defaultdict(list)
    for (role, pid), pts in memory.items():
        by_role[role].append((pid, pts))
    out = {}
    for role, procs in sorted(by_role.items()):
        procs.sort(key=lambda item: item[1][-1][0] - item[1][0][0], reverse=True)
        pid, pts = procs[0]
        fits = [g for g in (growth(p) for _, p in procs) if g is not None]
        out[role] = {
            "processes": len(procs),
            "longest_life_s": round(pts[-1][0] - pts[0][0]),
            "longest_first_mib": round(pts[0][1], 1),
            "longest_last_mib": round(pts[-1][1], 1),
            "peak_mib": round(max(m for _, p in procs for _, m in p), 1),
            "longest_growth_mib_per_h": None if growth(pts) is None else round(growth(pts), 1),
            "max_growth_mib_per_h": round(max(fits), 1) if fits else None,
        }
    return out
