"""The default partitioner: murmur2 as the Java client computes it, sticky null keys.

Expected values come from (1) literal pairs published in Apache Kafka's own
``UtilsTest.testMurmur2``, (2) ``java_murmur2`` below, a plain transcription of the
algorithm written for this test (no numpy, one key at a time), (3) kafka-python's
``murmur2`` and (4) librdkafka's ``murmur2_random`` partitioner, which is documented as
Java-compatible, asked on a real broker (tests/integration/test_partitioner.py).
"""

import os
import random

import numpy as np
import pyarrow as pa
import pytest

from kafka_ds.write.partitioner import (
    StickyPartitioner,
    murmur2,
    murmur2_array,
    partitions_for_keys,
)

# Kafka UtilsTest.testMurmur2 (signed 32-bit results of Utils.murmur2).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def java_murmur2(data: bytes) -> int:
    """Utils.murmur2 as in the Kafka sources, with Java's 32-bit int arithmetic spelt out."""
    mask = 0xFFFFFFFF
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = data[4 * i] | data[4 * i + 1] << 8 | data[4 * i + 2] << 16 | data[4 * i + 3] << 24
        k = (k * m) & mask
        k ^= k >> r  # >>> on a 32-bit value
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = length % 4
    base = length & ~3
    if rest == 3:
        h ^= data[base + 2] << 16
    if rest >= 2:
        h ^= data[base + 1] << 8
    if rest >= 1:
        h ^= data[base]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, num_partitions: int) -> int:
    """BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % numPartitions."""
    return (java_murmur2(key) & 0x7FFFFFFF) % num_partitions


def random_keys(count, seed=7):
    rnd = random.Random(seed)
    keys = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40))) for _ in range(count)]
    keys += [b"", b"\xff" * 3, b"\x80\x00\x00\x00", "clé-ü".encode(), bytes(range(256)) * 8]
    return keys


def test_reference_matches_kafkas_published_vectors():
    for key, expected in KAFKA_VECTORS.items():
        assert java_murmur2(key) == expected, key


def test_murmur2_published_vectors():
    for key, expected in KAFKA_VECTORS.items():
        assert murmur2(key) == expected, key
    got = murmur2_array(pa.array(list(KAFKA_VECTORS), pa.binary()))
    assert got.dtype == np.int32
    assert got.tolist() == list(KAFKA_VECTORS.values())


def test_murmur2_array_matches_reference_for_every_length_and_alignment():
    keys = random_keys(3000)
    expected = [java_murmur2(k) for k in keys]
    assert murmur2_array(pa.array(keys, pa.binary())).tolist() == expected
    # sliced arrays (offset into shared buffers) and string arrays (UTF-8 bytes)
    sliced = pa.array(keys, pa.binary()).slice(17, 500)
    assert murmur2_array(sliced).tolist() == expected[17:517]
    texts = ["", "a", "ab", "abc", "abcd", "ünïcödé", "x" * 1001]
    assert murmur2_array(pa.array(texts)).tolist() == [java_murmur2(t.encode()) for t in texts]


def test_murmur2_array_keys_of_one_word_count():
    # Keys whose lengths share a word count hash without the longest-first reordering;
    # lengths 8..11 mix all four tail cases. Also as a slice of a larger array (only the
    # slice's bytes are hashed) and an all-empty array.
    rnd = random.Random(11)
    keys = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(8, 12))) for _ in range(2000)]
    expected = [java_murmur2(k) for k in keys]
    assert murmur2_array(pa.array(keys, pa.binary())).tolist() == expected
    fixed = [b"key-%06d" % i for i in range(1000)]
    assert murmur2_array(pa.array(fixed, pa.binary()).slice(300, 400)).tolist() == [
        java_murmur2(k) for k in fixed[300:700]
    ]
    assert murmur2_array(pa.array([b""] * 5, pa.binary())).tolist() == [java_murmur2(b"")] * 5


def test_murmur2_array_keys_of_one_length():
    # Keys all of one length hash from strided views of the data: every length (all tail
    # cases), a slice of a larger array, one key, and one long key length.
    rnd = random.Random(5)
    for length in list(range(1, 18)) + [1001]:
        keys = [bytes(rnd.randrange(256) for _ in range(length)) for _ in range(40)]
        expected = [java_murmur2(k) for k in keys]
        assert murmur2_array(pa.array(keys, pa.binary())).tolist() == expected, length
        assert murmur2_array(pa.array(keys, pa.binary()).slice(3, 30)).tolist() == expected[3:33], (
            length
        )
        assert murmur2_array(pa.array(keys[:1], pa.binary())).tolist() == expected[:1]


def test_murmur2_long_keys_take_the_scalar_tail():
    # A few very long keys among short ones: the vectorised rounds stop early and the
    # long keys are finished one by one -- same results.
    rnd = random.Random(3)
    keys = [os.urandom(rnd.randrange(1, 12)) for _ in range(50)] + [
        os.urandom(100_003),
        os.urandom(4096),
    ]
    rnd.shuffle(keys)
    assert murmur2_array(pa.array(keys, pa.binary())).tolist() == [java_murmur2(k) for k in keys]


def test_murmur2_matches_kafka_python():
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

    keys = random_keys(2000, seed=11)
    ours = murmur2_array(pa.array(keys, pa.binary())).view(np.uint32).tolist()
    assert ours == [kafka_python_murmur2(k) & 0xFFFFFFFF for k in keys]


@pytest.mark.parametrize("num_partitions", [1, 3, 7, 12, 100])
def test_partitions_for_keys(num_partitions):
    keys = random_keys(1000, seed=num_partitions)
    got = partitions_for_keys(pa.array(keys, pa.binary()), num_partitions)
    assert got.tolist() == [java_partition(k, num_partitions) for k in keys]
    # literal pairs: toPositive(murmur2("foobar")) = 1357151166
    assert partitions_for_keys(pa.array([b"foobar"]), 50).tolist() == [1357151166 % 50]
    assert partitions_for_keys(pa.array([b"21"]), 10).tolist() == [((-973932308) & 0x7FFFFFFF) % 10]


def test_partitions_for_keys_per_row_partition_counts():
    keys = random_keys(200, seed=5)
    counts = np.array([3 if i % 2 else 8 for i in range(len(keys))])
    got = partitions_for_keys(pa.array(keys, pa.binary()), counts)
    assert got.tolist() == [java_partition(k, int(c)) for k, c in zip(keys, counts, strict=True)]


# --- sticky null keys -------------------------------------------------------------------


def runs(partitions):
    """[(partition, length)] of consecutive equal values."""
    out = []
    for p in partitions:
        if out and out[-1][0] == p:
            out[-1][1] += 1
        else:
            out.append([p, 1])
    return [tuple(x) for x in out]


def test_sticky_partitioner_switches_after_batch_size_bytes():
    sticky = StickyPartitioner(5, batch_size=1000, rng=np.random.default_rng(1))
    got = sticky.assign(np.full(95, 100, dtype=np.int64))  # 9,500 bytes
    assert runs(got.tolist())[0][1] == 10  # 10 x 100 bytes, then switch
    assert all(length == 10 for _p, length in runs(got.tolist())[:-1])
    assert all(a != b for (a, _), (b, _) in zip(runs(got)[:-1], runs(got)[1:], strict=True))
    assert len(set(got.tolist())) > 1
    # the run in progress continues in the next call: 5 records so far, 5 more fit
    more = sticky.assign(np.full(7, 100, dtype=np.int64))
    assert more[:5].tolist() == [got[-1]] * 5
    assert more[5] != got[-1]


def test_sticky_partitioner_spreads_over_all_partitions():
    sticky = StickyPartitioner(4, batch_size=500, rng=np.random.default_rng(2))
    got = sticky.assign(np.full(2000, 50, dtype=np.int64))
    counts = np.bincount(got, minlength=4)
    assert (counts > 0).all()
    assert len(runs(got.tolist())) == 200  # 2000 x 50 bytes / 500 bytes per sticky batch


def test_sticky_partitioner_huge_record_and_single_partition():
    sticky = StickyPartitioner(3, batch_size=100, rng=np.random.default_rng(3))
    got = sticky.assign(np.array([10, 10_000_000, 10, 10], dtype=np.int64))
    # the huge record joins the run it starts in and fills it: the next record switches,
    # once -- not once per 100 bytes it skipped
    assert [length for _p, length in runs(got.tolist())] == [2, 2]
    one = StickyPartitioner(1, batch_size=10)
    assert one.assign(np.full(50, 7, dtype=np.int64)).tolist() == [0] * 50
