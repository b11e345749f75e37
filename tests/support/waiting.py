"""Waiting for a service the suite started: retry on any not-yet-ready answer, and say what
was awaited when giving up.

A process that is still starting may refuse the connection, close it, answer an HTTP error,
or answer a page that is not the one asked for yet (Spark's master UI served its HTML
before its ``/json/`` page once, and a loop that took only ``OSError`` for "not ready"
failed the run with a ``JSONDecodeError``). So every exception of a probe counts as "not
ready yet"; only the deadline, or the process's death, ends the wait.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class NotReady(RuntimeError):
    """The awaited service did not become ready in time (or its process died)."""


def wait_until(
    what: str,
    probe: Callable[[], T | None],
    timeout: float,
    interval: float = 0.2,
    died: Callable[[], str | None] = lambda: None,
) -> T:
    """``probe()``'s first answer that is not None. Any exception of ``probe`` is a not-ready
    answer, kept for the message; ``died()`` returns why the service cannot come any more
    (a process exited) or None. Raises :class:`NotReady` naming ``what`` and the last
    answer."""
    deadline = time.monotonic() + timeout
    last: object = "no answer yet"
    while True:
        why_dead = died()
        if why_dead:
            raise NotReady(f"gave up waiting for {what}: {why_dead}")
        try:
            answer = probe()
            if answer is not None:
                return answer
            last = "answered, but not ready"
        except Exception as exc:  # refused, reset, HTTP error, a page that is not JSON yet
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise NotReady(f"gave up waiting for {what} after {timeout:.0f} s; last answer: {last}")
        time.sleep(interval)


def get_json(url: str, timeout: float = 2.0) -> object:
    """The JSON document at ``url`` (raises on anything else: refused, HTTP error, HTML)."""
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return json.loads(answer.read())
