"""Where decompressed record batches land: one reusable numpy buffer gathers several
batches (no intermediate ``bytes`` per batch, see ``compression.decompress_into``);
``records_starts`` keeps one per thread as its work buffer."""

from __future__ import annotations

import numpy as np


class OutputBuffer:
    """A growable ``uint8`` numpy buffer that decompressions append to.

    ``array`` is the storage (its capacity may exceed ``size``); ``size`` is the
    number of valid bytes.  Re-use one instance across calls (``reset()``) to
    avoid re-allocating; ``SLACK`` zero bytes are kept past ``size`` so that
    vectorised readers may look a few bytes beyond the end of the data.
    """

    SLACK = 16
    __slots__ = ("array", "size")

    def __init__(self, capacity: int = 0):
        self.array = np.empty(max(int(capacity), 0) + self.SLACK, dtype=np.uint8)
        self.size = 0

    @property
    def capacity(self) -> int:
        return len(self.array) - self.SLACK

    def reset(self) -> None:
        self.size = 0

    def reserve(self, extra: int) -> None:
        """Make room for at least ``extra`` more bytes after ``size``."""
        need = self.size + extra
        if need > self.capacity:
            new_cap = max(need, 2 * self.capacity, 1 << 16)
            new = np.empty(new_cap + self.SLACK, dtype=np.uint8)
            if self.size:
                new[: self.size] = self.array[: self.size]
            self.array = new

    def free_view(self, limit: int):
        """A writable numpy view of at most ``limit`` free bytes after ``size``."""
        return self.array[self.size : self.size + limit]

    def append(self, data) -> None:
        n = len(data)
        self.reserve(n)
        self.array[self.size : self.size + n] = np.frombuffer(data, dtype=np.uint8)
        self.size += n

    def pad(self) -> None:
        """Zero the slack bytes after ``size`` (for readers that over-read)."""
        self.array[self.size : self.size + self.SLACK] = 0

    def view(self):
        return self.array[: self.size]

    def tobytes(self) -> bytes:
        return self.array[: self.size].tobytes()
