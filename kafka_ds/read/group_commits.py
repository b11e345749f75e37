"""Consumer-group commits of a streaming read: the end offsets of micro-batches Spark has
recorded as done go to the group (OffsetCommit, generation -1, as any standalone consumer)
from a background thread, so a slow or absent coordinator never holds up planning. When
the group's offsets move, and why they are never ahead of processed data:
docs/streaming.md ("Consumer-group commits")."""

from __future__ import annotations

import logging
import threading
import time

from ..client import make_client
from ..options import ReadOptions

log = logging.getLogger(__name__)


class GroupCommitter:
    """Sends OffsetCommit for the newest offsets handed to :meth:`submit`, from a daemon
    thread with its own connection, so a slow or absent coordinator never holds up
    planning. Offsets only move forward: a submission at or below the previous one
    everywhere is ignored."""

    def __init__(self, opts: ReadOptions, group_id: str, max_backoff_s: float = 10.0):
        self.opts = opts
        self.group_id = group_id
        self.max_backoff_s = max_backoff_s
        self._cond = threading.Condition()
        self._wanted: dict | None = None  # newest offsets to commit
        self._committed: dict | None = None  # last offsets the coordinator accepted
        self._thread: threading.Thread | None = None
        self._closed = False
        self.failures = 0

    def submit(self, offsets: dict[tuple[str, int], int]) -> None:
        offsets = {tp: off for tp, off in offsets.items() if off >= 0}
        if not offsets:
            return
        with self._cond:
            previous = self._wanted
            if previous is not None and (
                offsets == previous
                or (
                    set(offsets) <= set(previous)
                    and all(off <= previous[tp] for tp, off in offsets.items())
                )
            ):
                return
            self._wanted = offsets
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, daemon=True, name=f"kafka_ds-group-commit-{self.group_id}"
                )
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        client = None
        backoff = 0.2
        while True:
            with self._cond:
                while not self._closed and self._wanted == self._committed:
                    self._cond.wait()
                if self._closed and self._wanted == self._committed:
                    break
                wanted = self._wanted
                assert wanted is not None  # the wait above ends once offsets were submitted
            try:
                if client is None:
                    client = make_client(self.opts)
                client.commit_offsets(self.group_id, wanted)
            except Exception as exc:  # noqa: BLE001 - a commit must never fail the query
                self.failures += 1
                log.warning(
                    "OffsetCommit of group %r failed (%s); retrying in %.1f s",
                    self.group_id,
                    exc,
                    backoff,
                )
                if client is not None:
                    client.close()
                    client = None
                with self._cond:
                    if not self._closed:
                        self._cond.wait(backoff)
                    else:
                        break
                backoff = min(backoff * 2, self.max_backoff_s)
                continue
            backoff = 0.2
            with self._cond:
                self._committed = wanted
                self._cond.notify_all()
        if client is not None:
            client.close()

    @property
    def wanted(self) -> dict | None:
        """The newest offsets handed to :meth:`submit`."""
        with self._cond:
            return self._wanted

    def flush(self, timeout: float) -> bool:
        """Wait until the newest submitted offsets are committed (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._wanted != self._committed:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    break
                self._cond.wait(left)
            return self._wanted == self._committed

    def close(self, timeout: float) -> None:
        done = self.flush(timeout)
        if not done:
            log.warning(
                "stopping with the offsets %s of group %r not committed",
                self._wanted,
                self.group_id,
            )
        with self._cond:
            self._closed = True
            self._cond.notify_all()
