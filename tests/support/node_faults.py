"""Node faults on an Apache Kafka cluster of tests/support/apache_kafka.py that the cluster
class itself does not offer: which node is the active controller, and a node whose log
directory can be filled up. Used by tests/faults/test_batch_paths.py and the soak
(benchmarks/soak_cluster.py).

The full log directory is a tmpfs of its own under the last node's data folder, mounted
before the nodes are formatted. Mounting needs root (CAP_SYS_ADMIN); where it is refused
the cluster starts on the ordinary disk and ``small_disk_refused`` says why.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time

from tests.support.apache_kafka import KafkaCluster

#: words of the node's own log that say what a full disk did to it
DISK_WORDS = ("No space left", "offline", "SIGBUS", "fatal")


def active_controller(cluster: KafkaCluster) -> int | None:
    """The KRaft quorum's leader: the highest epoch in the nodes' ``quorum-state`` files
    (every node is a voter here; the file is rewritten at each election)."""
    best: tuple[int, int | None] = (-1, None)
    for node in cluster.nodes:
        path = os.path.join(node.dir, "data", "__cluster_metadata-0", "quorum-state")
        with contextlib.suppress(OSError, ValueError):
            with open(path) as f:
                state = json.load(f)
            if state.get("leaderId", -1) >= 0 and state.get("leaderEpoch", -1) > best[0]:
                best = (state["leaderEpoch"], state["leaderId"])
    return best[1]


def small_disk_cluster(disk_mib: int, **kwargs) -> KafkaCluster:
    """Three nodes (``KafkaCluster(3, **kwargs)``), the last one's log directory on a
    tmpfs of ``disk_mib`` MiB. ``cluster.small_disk``: its path, or None when the mount
    was refused (``cluster.small_disk_refused`` then holds mount's answer). Stop it with
    :func:`stop_small_disk_cluster`."""
    mounted: dict[str, str] = {}

    def prepare(cluster):
        data = os.path.join(cluster.directory, "node-3", "data")
        os.makedirs(data, exist_ok=True)
        run = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={disk_mib}m", "kafka-node-3", data],
            capture_output=True,
            text=True,
        )
        if run.returncode == 0:
            mounted["path"] = data
        else:
            mounted["refused"] = (run.stderr or run.stdout).strip() or f"exit {run.returncode}"
        return {}

    cluster = KafkaCluster(3, prepare=prepare, **kwargs)
    cluster.small_disk = mounted.get("path")  # type: ignore[attr-defined]
    cluster.small_disk_refused = mounted.get("refused")  # type: ignore[attr-defined]
    return cluster


def stop_small_disk_cluster(cluster: KafkaCluster) -> None:
    cluster.stop()
    path = getattr(cluster, "small_disk", None)
    if path:
        subprocess.run(["umount", "-l", path], check=False)
        subprocess.run(["rm", "-rf", cluster.directory], check=False)


def fill_log_dir(cluster: KafkaCluster, wait_s: float = 120.0) -> dict:
    """Fill the small disk's last byte with a file of zeros and wait (at most ``wait_s``)
    for what Kafka does about it. Returns ``filler`` (its path), ``filler_mib``,
    ``node_exited`` and the node's ``log_lines`` about it. Give the disk back with
    :func:`free_log_dir`."""
    path = getattr(cluster, "small_disk", None)
    assert path, f"no small disk: {getattr(cluster, 'small_disk_refused', None)}"
    node = cluster.nodes[-1]
    filler = os.path.join(path, "filler")
    chunk = b"\0" * (1 << 20)
    written = 0
    with open(filler, "wb") as out:
        with contextlib.suppress(OSError):
            while True:
                out.write(chunk)
                out.flush()
                written += 1
    deadline = time.monotonic() + wait_s
    while node.is_alive() and time.monotonic() < deadline:
        time.sleep(0.25)
    lines: list[str] = []
    for log_path in (node.log_path, os.path.join(node.dir, "stdout.log")):
        with contextlib.suppress(OSError), open(log_path, errors="replace") as f:
            lines += [line.strip()[:300] for line in f if any(w in line for w in DISK_WORDS)]
    return {
        "filler": filler,
        "filler_mib": written,
        "node_exited": not node.is_alive(),
        "log_lines": lines[:3],
    }


def free_log_dir(cluster: KafkaCluster, filled: dict, timeout: float = 120.0) -> None:
    """Remove the filler and start the node again (a log directory that failed stays
    offline until its node restarts, so a node still running is stopped first)."""
    os.unlink(filled["filler"])
    node = cluster.nodes[-1]
    if node.is_alive():
        cluster.shutdown(node.node_id, timeout=timeout)
    cluster.restart(node.node_id, timeout=timeout)
