"""The Java client's default partitioner, column-wise.

* Keyed records: ``toPositive(murmur2(key)) % numPartitions``, where murmur2 is
  the 32-bit MurmurHash2 variant of Kafka's ``Utils.murmur2`` (seed
  ``0x9747b28c``, little-endian 4-byte words, signed result). A key lands in the
  partition a JVM producer (or librdkafka's ``murmur2_random``) would choose.
* Records without a key: "sticky" -- consecutive null-key records go to one
  partition until about ``batch.size`` bytes went there, then another partition
  is picked at random (KIP-480), so null keys form large batches yet still
  spread over all partitions.

Hashing works on the offsets and data buffers of an Arrow binary array with
numpy: one vectorised step per 4-byte word position over all keys that are
still that long, no Python object per key.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..protocol.records_arrays import as_binary_array, binary_lengths

SEED = 0x9747B28C
M = 0x5BD1E995
_M32 = np.uint32(M)
_MASK = 0xFFFFFFFF

# Below this many keys still being hashed, finishing them one by one in Python is
# cheaper than another round of numpy calls (matters for a few very long keys).
_VECTOR_MIN_LANES = 8


def _offsets_and_data(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(int64 offsets of len(arr)+1 into ``data``, uint8 data) of a binary array.

    ``data`` is only the bytes the array's rows use (offsets rebased to 0): a slice of a
    larger array shares its whole data buffer, and the hash copies ``data`` once."""
    _validity, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32, count=len(arr) + 1 + arr.offset)[
        arr.offset :
    ].astype(np.int64)
    if data_buf is None or data_buf.size == 0:
        return offsets - offsets[0], np.zeros(0, dtype=np.uint8)
    first, end = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(data_buf, dtype=np.uint8)[first:end]
    return offsets - first, data


def _mix_words(words: np.ndarray) -> np.ndarray:
    """``k *= m; k ^= k >>> 24; k *= m`` on uint32 words (wrapping multiply)."""
    k = words * _M32
    k ^= k >> np.uint32(24)
    k *= _M32
    return k


def murmur2_array(keys) -> np.ndarray:
    """Kafka's murmur2 of every key of a binary/string Arrow array, as int32.

    Null keys hash like empty ones; callers route them elsewhere anyway.
    """
    keys = as_binary_array(keys, "keys")
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    offsets, data = _offsets_and_data(keys)
    starts = offsets[:-1]
    lengths = np.maximum(binary_lengths(keys), 0)
    if int(lengths.min()) == int(lengths.max()) and len(data):
        return _murmur2_fixed_length(data, n, int(lengths[0]))
    # Pad so every 4-byte read below stays in bounds, then view the bytes as
    # little-endian uint32 starting at *every* byte position (stride 1): word j of
    # key i is one gather at starts[i] + 4j, however the key is aligned.
    padded = np.zeros(len(data) + 4, dtype=np.uint8)
    padded[: len(data)] = data
    words_at = np.ndarray(shape=(len(padded) - 3,), dtype="<u4", buffer=padded.data, strides=(1,))

    h = (np.uint32(SEED) ^ lengths.astype(np.uint32)).astype(np.uint32)
    nwords = lengths >> 2
    if int(nwords.min()) == int(nwords.max()):
        # Keys of one word count (fixed-format keys, the usual case): no reordering.
        order = None
        sorted_words, sorted_starts, hs = nwords, starts, h
    else:
        # Longest keys first so the keys still hashing at word j are a prefix.
        order = np.argsort(-nwords, kind="stable")
        sorted_words = nwords[order]
        sorted_starts = starts[order]
        hs = h[order]
    max_words = int(sorted_words[0]) if n else 0
    # count of keys with more than j words, for each j
    active_counts = np.searchsorted(-sorted_words, -np.arange(1, max_words + 1), side="right")
    j = 0
    while j < max_words:
        lanes = int(active_counts[j])
        if lanes < _VECTOR_MIN_LANES and max_words - j > 4:
            break
        k = _mix_words(words_at[sorted_starts[:lanes] + 4 * j])
        hl = hs[:lanes]
        hl *= _M32
        hl ^= k
        j += 1
    if j < max_words:
        # The few long keys left: mix all their remaining words at once with numpy,
        # chain them in Python (the chain is inherently sequential).
        for lane in range(int(active_counts[j])):
            count = int(sorted_words[lane])
            start = int(sorted_starts[lane])
            ks = _mix_words(words_at[start + 4 * np.arange(j, count)]).tolist()
            value = int(hs[lane])
            for kv in ks:
                value = ((value * M) & _MASK) ^ kv
            hs[lane] = value
    if order is not None:
        h[order] = hs

    # Tail: the last length % 4 bytes, then one more multiply when there were any.
    tail = (lengths & 3).astype(np.int64)
    tail_pos = starts + (lengths & ~3)
    has3 = tail == 3
    has2 = tail >= 2
    has1 = tail >= 1
    if has3.any():
        h[has3] ^= padded[tail_pos[has3] + 2].astype(np.uint32) << np.uint32(16)
    if has2.any():
        h[has2] ^= padded[tail_pos[has2] + 1].astype(np.uint32) << np.uint32(8)
    if has1.any():
        h[has1] ^= padded[tail_pos[has1]].astype(np.uint32)
        h[has1] *= _M32
    h ^= h >> np.uint32(13)
    h *= _M32
    h ^= h >> np.uint32(15)
    return h.view(np.int32)


def _strided(data, start, step, dtype):
    """Element ``start + i * step`` of the bytes ``data`` as ``dtype``, for every key i:
    a view (numpy reads unaligned words), no gather."""
    return np.ndarray(
        shape=(len(data) // step,), dtype=dtype, buffer=data, offset=start, strides=(step,)
    )


def _murmur2_fixed_length(data, n, length):
    """murmur2 of ``n`` keys of ``length`` bytes each, back to back in ``data`` (keys of
    one format, the usual case): word j of every key is a strided view."""
    h = np.full(n, SEED ^ length, dtype=np.uint32)
    for j in range(length >> 2):
        h *= _M32
        h ^= _mix_words(_strided(data, 4 * j, length, "<u4"))
    tail = length & 3
    if tail:
        for k in reversed(range(tail)):
            h ^= _strided(data, (length & ~3) + k, length, np.uint8).astype(np.uint32) << (8 * k)
        h *= _M32
    h ^= h >> np.uint32(13)
    h *= _M32
    h ^= h >> np.uint32(15)
    return h.view(np.int32)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of one key (signed 32-bit), via the vectorised path."""
    return int(murmur2_array(pa.array([bytes(data)], pa.binary()))[0])


def partitions_for_keys(keys, num_partitions) -> np.ndarray:
    """``(murmur2(key) & 0x7fffffff) % num_partitions`` per key, as int32.

    ``num_partitions`` is an int or a per-key int array (rows of several topics).
    """
    hashes = murmur2_array(keys).view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (hashes.astype(np.int64) % np.asarray(num_partitions, dtype=np.int64)).astype(np.int32)


class StickyPartitioner:
    """Null-key records of one topic: one partition until ``batch_size`` bytes went
    there, then a random other one. State carries over from one call to the next,
    so a sticky batch can span Arrow batches."""

    def __init__(
        self, num_partitions: int, batch_size: int, rng: np.random.Generator | None = None
    ):
        self.num_partitions = num_partitions
        self.batch_size = max(int(batch_size), 1)
        self.rng = rng or np.random.default_rng()
        self.current = int(self.rng.integers(num_partitions))
        self.used = 0  # bytes already sent to ``current`` in this sticky batch

    def _another(self, previous: int) -> int:
        if self.num_partitions == 1:
            return 0
        pick = int(self.rng.integers(self.num_partitions - 1))
        return pick if pick < previous else pick + 1

    def assign(self, sizes: np.ndarray) -> np.ndarray:
        """Partitions (int32) for null-key records of (estimated) ``sizes`` bytes, in order."""
        n = len(sizes)
        if n == 0:
            return np.zeros(0, dtype=np.int32)
        if self.used >= self.batch_size:
            self.current = self._another(self.current)
            self.used = 0
        before = np.empty(n, dtype=np.int64)  # bytes of this sticky run before each record
        before[0] = self.used
        if n > 1:
            np.cumsum(sizes[:-1], out=before[1:])
            before[1:] += self.used
        # A record whose first byte falls into the next batch_size window starts a new
        # sticky batch. Windows skipped by one huge record do not count twice.
        window = before // self.batch_size
        switch = np.zeros(n, dtype=np.int64)
        switch[1:] = window[1:] != window[:-1]
        chunk = np.cumsum(switch)
        chunks = int(chunk[-1]) + 1
        chunk_partition = np.empty(chunks, dtype=np.int32)
        chunk_partition[0] = self.current
        for c in range(1, chunks):  # one iteration per ~batch_size bytes, not per record
            chunk_partition[c] = self._another(int(chunk_partition[c - 1]))
        self.current = int(chunk_partition[-1])
        self.used = int(before[-1] + sizes[-1] - window[-1] * self.batch_size)
        return chunk_partition[chunk]
