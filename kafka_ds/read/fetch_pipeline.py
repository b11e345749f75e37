"""One Spark task's Fetch requests, one ahead of the decode (``ranges.read_range``).

While the answer at offset N is decoded, :class:`FetchAhead`'s thread already fetches the
next piece, at the offset the answer's batch headers say it ends
(:func:`next_offset_from_headers`). That is a guess the decoder checks: ``read_range``
asks :meth:`FetchAhead.get` for exactly the offset and size it wants, and an answer
fetched for anything else is dropped and fetched again, so every decision stays the
sequential loop's. At most two answers per task exist. Why and how: docs/architecture.md
("Reading a range").
"""

from __future__ import annotations

import struct
import threading

from ..errors import KafkaError
from ..protocol.errors import OffsetOutOfRange, error_for_code

# base offset, batch length, partition leader epoch, magic: the start of every v0/v1/v2 batch
_BATCH_START = struct.Struct(">qiib")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23  # in a v2 batch header
_LOG_OVERHEAD = 12  # base offset + length


def next_offset_from_headers(records, fetch_offset: int) -> int:
    """The offset after the last complete batch of a Fetch answer's ``records``, read from
    the batch headers only (v2: base offset + last offset delta + 1; v0/v1: the message's
    offset + 1, a compressed wrapper carrying its last inner message's offset);
    ``fetch_offset`` when no batch is complete or the bytes make no sense (the decoder
    reports those)."""
    if not records:
        return fetch_offset
    view = memoryview(records)
    size = view.nbytes
    pos = 0
    found = fetch_offset
    unpack_start = _BATCH_START.unpack_from
    unpack_delta = _LAST_OFFSET_DELTA.unpack_from
    try:
        while size - pos >= _LOG_OVERHEAD + 5:
            base, length, _epoch, magic = unpack_start(view, pos)
            end = pos + _LOG_OVERHEAD + length
            if length <= 0 or end > size:
                break
            if magic == 2:
                following = base + unpack_delta(view, pos + _LAST_OFFSET_DELTA_AT)[0] + 1
            else:
                following = base + 1
            if following > found:
                found = following
            pos = end
    except struct.error:
        pass
    return found


class _Stopped(Exception):
    """The pipeline was closed while its thread fetched (not retriable: ends the retries)."""


def fetch_partition(
    client,
    opts,
    topic: str,
    partition: int,
    level: int,
    stopping: threading.Event,
    connection_used: list,
):
    """``fetch(offset, fetch_bytes)`` for :class:`FetchAhead`: one Fetch of one partition,
    retried under the client's policy within ``kafkaConsumer.pollTimeoutMs``; error codes
    other than OFFSET_OUT_OF_RANGE raise. ``stopping`` cuts the back-off sleeps short and
    ends the retries; ``connection_used[0]`` is the connection of the attempt under way
    (for :meth:`FetchAhead.close` to interrupt)."""

    def fetch(offset: int, fetch_bytes: int):
        what = f"Fetch {topic}-{partition} at offset {offset}"

        def attempt():
            if stopping.is_set():
                raise _Stopped(what)
            try:
                connection_used[0] = client.connection(client.leader_for(topic, partition))
                if stopping.is_set():
                    raise _Stopped(what)
                part = client.fetch(
                    topic,
                    partition,
                    offset,
                    max_bytes=fetch_bytes,
                    max_wait_ms=opts.fetch_max_wait_ms,
                    isolation_level=level,
                )
            except KafkaError:
                if stopping.is_set():
                    raise _Stopped(what) from None
                raise
            code = part["error_code"]
            if code and code != OffsetOutOfRange.code:
                raise error_for_code(code)(what)
            return part

        def refresh(_exc):
            if stopping.is_set():
                raise _Stopped(what)
            client.refresh_metadata([topic])

        # Each Fetch may take up to kafkaConsumer.pollTimeoutMs of retries (a leader
        # failover or a rolling restart), as the JVM source's poll does.
        policy = client.retry_policy(
            opts.poll_timeout_ms, "kafkaConsumer.pollTimeoutMs", sleep=stopping.wait
        )
        try:
            return policy.run(attempt, what, refresh=refresh)
        finally:
            client.retry_stats_add(policy)

    return fetch


class _Answer:
    __slots__ = ("key", "part", "error", "guessed")

    def __init__(self, key, part, error, guessed=False):
        self.key = key
        self.part = part
        self.error = error
        self.guessed = guessed


class FetchAhead:
    """Fetch answers of one partition, the next one fetched while the current one is
    decoded (see the module docstring).

    ``fetch(offset, fetch_bytes)`` returns a Fetch answer's partition dict or raises;
    after the first call it runs in the background thread. ``limit``: no offset at or
    beyond it is fetched ahead (the range's end). ``interrupt()`` wakes that thread from a
    blocked socket call (called by :meth:`close` while a fetch is under way).
    """

    def __init__(
        self,
        fetch,
        *,
        limit: int,
        name: str,
        interrupt=None,
        stopping: threading.Event | None = None,
    ):
        self._fetch = fetch
        self._limit = limit
        self._name = name
        self._interrupt = interrupt
        self.stopping = stopping or threading.Event()
        self._cond = threading.Condition()
        self._job: tuple[tuple, bool] | None = None  # (key, guessed): the thread's next fetch
        self._busy = False  # the thread is fetching
        self._ready: _Answer | None = None  # fetched and not yet taken
        self._wanted: tuple | None = None  # the key the caller waits for (no guessing past others)
        self._thread: threading.Thread | None = None
        self.guessed_right = 0  # answers taken that were fetched ahead
        self.guessed_wrong = 0  # answers fetched ahead for another offset: dropped

    # --- the caller (the Spark task's thread) ------------------------------------------

    def get(self, offset: int, fetch_bytes: int):
        """The Fetch answer at ``offset`` for ``fetch_bytes`` (raises its error). The caller
        is done with the answer it got before."""
        key = (offset, fetch_bytes)
        thread = self._thread
        answer = self._fetch_here(key) if thread is None else self._take(key, thread)
        if answer.error is not None:
            error, answer.error = answer.error, None
            raise error
        return answer.part

    def _fetch_here(self, key):
        try:
            part = self._fetch(*key)
        except BaseException as exc:  # noqa: BLE001  (handed back as it is)
            return _Answer(key, None, exc)
        guess = self._guess(key, part)
        if guess is not None and not self.stopping.is_set():
            self._job = (guess, True)
            thread = self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            thread.start()
        return _Answer(key, part, None)

    def _take(self, key, thread: threading.Thread):
        cond = self._cond
        with cond:
            self._wanted = key
            cond.notify_all()
            try:
                while True:
                    if self.stopping.is_set():
                        raise RuntimeError(f"{self._name}: used after close()")
                    answer = self._ready
                    if answer is not None:
                        self._ready = None
                        if answer.key == key:
                            if answer.guessed:
                                self.guessed_right += 1
                            return answer
                        self.guessed_wrong += 1  # dropped
                        continue
                    if not self._busy and (self._job is None or self._job[0] != key):
                        self._job = (key, False)  # (replacing a guess not started)
                        cond.notify_all()
                    if not thread.is_alive():
                        raise RuntimeError(f"{self._name}: the fetch thread ended unexpectedly")
                    cond.wait(1.0)
            finally:
                self._wanted = None
                cond.notify_all()

    def quiesce(self) -> None:
        """Wait until the thread fetches nothing and drop what it fetched ahead, so that the
        caller may use the client itself (e.g. ListOffsets after OFFSET_OUT_OF_RANGE)."""
        if self._thread is None:
            return
        cond = self._cond
        with cond:
            self._wanted = ()
            self._job = None
            try:
                while self._busy and self._thread.is_alive():
                    cond.wait(1.0)
                if self._ready is not None:
                    self._ready = None
                    self.guessed_wrong += 1
                self._job = None
            finally:
                self._wanted = None

    def close(self) -> None:
        """Stop the thread (interrupting a fetch under way) and wait for it to end."""
        self.stopping.set()
        thread = self._thread
        if thread is None:
            return
        with self._cond:
            busy = self._busy
            self._job = None
            self._ready = None
            self._cond.notify_all()
        if busy and self._interrupt is not None:
            self._interrupt()
        thread.join()

    # --- the thread ------------------------------------------------------------------------

    def _guess(self, key, part):
        """The key of the Fetch that will most likely follow ``part`` (None: no guess)."""
        if part.get("error_code"):
            return None
        offset, fetch_bytes = key
        following = next_offset_from_headers(part.get("records"), offset)
        if offset < following < self._limit:
            return (following, fetch_bytes)
        return None

    def _run(self):
        cond = self._cond
        while True:
            with cond:
                # Two answers at most: the one the caller holds and the one fetched now
                # (the next Fetch starts once the caller has taken the answer before).
                while not self.stopping.is_set() and (self._job is None or self._ready is not None):
                    cond.wait()
                if self.stopping.is_set():
                    return
                job = self._job
                assert job is not None  # the wait above ends with a job
                (key, guessed), self._job = job, None
                self._busy = True
            try:
                answer = _Answer(key, self._fetch(*key), None, guessed)
            except BaseException as exc:  # noqa: BLE001  (raised in the caller's thread)
                answer = _Answer(key, None, exc, guessed)
            guess = None if answer.error is not None else self._guess(key, answer.part)
            with cond:
                self._busy = False
                if self.stopping.is_set():
                    cond.notify_all()
                    return
                self._ready = answer
                if guess is not None and self._job is None and self._wanted in (None, key):
                    self._job = (guess, True)
                cond.notify_all()
