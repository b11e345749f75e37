"""Tests for kafka_ds.protocol.compression (pure, no broker)."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import lz4.frame
import pytest
import snappy
import zstandard

from kafka_ds.errors import KafkaProtocolError
from kafka_ds.protocol import compression as comp
from kafka_ds.protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    codec_id,
    codec_name,
    compress,
    decompress,
    decompress_into,
)
from kafka_ds.protocol.lz4_legacy import fix_legacy_lz4_header, xxh32
from kafka_ds.protocol.output_buffer import OutputBuffer

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED = [GZIP, SNAPPY, LZ4, ZSTD]

PAYLOADS = [
    b"",
    b"x",
    b"hello kafka " * 1000,
    os.urandom(100_000),  # incompressible
    (b"abc" * 30_000) + os.urandom(5000),  # > one 64 KiB lz4 block, > 32 KiB xerial block
]


def test_codec_names_and_ids():
    assert [codec_name(i) for i in range(5)] == ["none", "gzip", "snappy", "lz4", "zstd"]
    for i, name in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
        assert codec_id(name) == i
        assert codec_id(name.upper()) == i
        assert codec_id(i) == i
    assert codec_id(None) == NONE
    assert codec_id("uncompressed") == NONE
    for bad in ("brotli", "", 5, -1, "lz5"):
        with pytest.raises(KafkaProtocolError):
            codec_id(bad)
    for bad in (5, -1, 7):
        with pytest.raises(KafkaProtocolError):
            codec_name(bad)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "text", "random", "mixed"])
def test_round_trip(codec, payload):
    packed = compress(codec, payload)
    assert decompress(codec, packed) == payload
    # also from a memoryview / bytearray
    assert decompress(codec, memoryview(bytearray(packed))) == payload


@pytest.mark.parametrize("codec", COMPRESSED)
def test_round_trip_through_independent_libraries(codec):
    data = b"interop " * 5000 + os.urandom(3000)
    # theirs -> ours
    theirs = {
        GZIP: lambda d: gzip.compress(d),
        SNAPPY: lambda d: snappy.compress(d),  # raw snappy
        LZ4: lambda d: lz4.frame.compress(d),  # with content size
        ZSTD: lambda d: zstandard.ZstdCompressor(level=5).compress(d),
    }[codec]
    assert decompress(codec, theirs(data)) == data
    # ours -> theirs
    ours = compress(codec, data)
    back = {
        GZIP: gzip.decompress,
        SNAPPY: _xerial_decode_reference,
        LZ4: lz4.frame.decompress,
        ZSTD: lambda d: zstandard.ZstdDecompressor().decompressobj().decompress(d),
    }[codec](ours)
    assert back == data


def _xerial_decode_reference(data: bytes) -> bytes:
    """Independent xerial reader (aiokafka's)."""
    from aiokafka.codec import snappy_decode

    return snappy_decode(data)


def test_aiokafka_codecs_interop():
    from aiokafka import codec as ac

    data = b"aiokafka interop " * 4000
    assert decompress(GZIP, ac.gzip_encode(data)) == data
    assert decompress(SNAPPY, ac.snappy_encode(data)) == data  # xerial
    assert decompress(SNAPPY, ac.snappy_encode(data, xerial_compatible=False)) == data
    assert decompress(LZ4, ac.lz4_encode(data)) == data
    assert decompress(ZSTD, ac.zstd_encode(data)) == data
    assert ac.gzip_decode(compress(GZIP, data)) == data
    assert ac.snappy_decode(compress(SNAPPY, data)) == data
    assert ac.lz4_decode(compress(LZ4, data)) == data
    assert ac.zstd_decode(compress(ZSTD, data)) == data


def test_snappy_xerial_framing_built_by_hand():
    blocks = [b"first block " * 100, os.urandom(500), b"", b"third" * 7000]
    stream = bytearray(XERIAL_MAGIC)
    stream += struct.pack(">ii", 1, 1)  # version, compatible version
    for block in blocks:
        raw = snappy.compress(block)  # raw snappy, independent encoder
        stream += struct.pack(">i", len(raw))
        stream += raw
    assert bytes(stream[:8]) == b"\x82SNAPPY\x00"
    assert decompress(SNAPPY, bytes(stream)) == b"".join(blocks)
    # our compressor writes xerial framing with the same magic
    ours = compress(SNAPPY, b"abc" * 50000)
    assert ours[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", ours[8:16]) == (1, 1)
    assert decompress(SNAPPY, ours) == b"abc" * 50000
    # raw mode
    assert compress(SNAPPY, b"abc" * 10, xerial=False)[:8] != XERIAL_MAGIC


@pytest.mark.parametrize("cut", [10, 17, 20, -1, -5])
def test_snappy_xerial_truncated_or_bad(cut):
    stream = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    raw = snappy.compress(b"payload" * 1000)
    stream += struct.pack(">i", len(raw)) + raw
    with pytest.raises(KafkaProtocolError):
        decompress(SNAPPY, stream[:cut])
    bad_len = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", -7) + raw
    with pytest.raises(KafkaProtocolError):
        decompress(SNAPPY, bad_len)


def test_zstd_frame_without_content_size():
    data = b"zstd streaming " * 20000
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert zstandard.frame_content_size(frame) == -1  # no content size in the header
    assert decompress(ZSTD, frame) == data
    # streamed frames (like zstd-jni's ZstdOutputStream) do not know their size either
    cobj = zstandard.ZstdCompressor().compressobj()
    streamed = cobj.compress(data[:1000]) + cobj.compress(data[1000:]) + cobj.flush()
    assert zstandard.frame_content_size(streamed) == -1
    assert decompress(ZSTD, streamed) == data
    # two concatenated frames
    assert decompress(ZSTD, frame + frame) == data + data


def test_lz4_frame_variants():
    data = os.urandom(1000) * 200
    for kwargs in (
        {},
        {"store_size": False},
        {"block_linked": False, "content_checksum": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
        {"block_checksum": True},
    ):
        assert decompress(LZ4, lz4.frame.compress(data, **kwargs)) == data


def test_xxh32_known_vectors_and_lz4_header_checksum():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    # The lz4 library's own header checksums are xxh32(descriptor) >> 8 & 0xff.
    for kwargs in (
        {"store_size": True},
        {"store_size": False},
        {"block_size": lz4.frame.BLOCKSIZE_MAX1MB},
    ):
        frame = lz4.frame.compress(b"q" * 1000, **kwargs)
        flg = frame[4]
        end = 6 + (8 if flg & 0x08 else 0)
        assert (xxh32(frame[4:end]) >> 8) & 0xFF == frame[end]
    long_input = bytes(range(256)) * 3
    # 16+ byte path: self-consistency with the incremental definition
    assert xxh32(long_input) != xxh32(long_input[:-1])


def test_legacy_lz4_broken_header_checksum():
    data = b"legacy v0 lz4 " * 500
    frame = bytearray(lz4.frame.compress(data, store_size=False, block_linked=False))
    # Kafka < 0.10 computed the header checksum over magic + descriptor.
    frame[6] = (xxh32(bytes(frame[0:6])) >> 8) & 0xFF
    broken = bytes(frame)
    assert broken != lz4.frame.compress(data, store_size=False, block_linked=False)
    with pytest.raises(KafkaProtocolError):
        decompress(LZ4, broken)
    assert decompress(LZ4, broken, legacy_lz4=True) == data
    # a correct frame is unchanged by the fix
    good = lz4.frame.compress(data)
    assert fix_legacy_lz4_header(good) == good
    assert decompress(LZ4, good, legacy_lz4=True) == data


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_bomb_is_capped(codec):
    bomb = compress(codec, bytes(8 * 1024 * 1024))  # 8 MiB of zeros
    assert len(bomb) < 1024 * 1024 or codec == NONE
    with pytest.raises(KafkaProtocolError, match="max_size"):
        decompress(codec, bomb, max_size=1024 * 1024)
    assert len(decompress(codec, bomb, max_size=8 * 1024 * 1024)) == 8 * 1024 * 1024
    with pytest.raises(KafkaProtocolError):
        decompress(codec, bomb, max_size=8 * 1024 * 1024 - 1)


def test_bomb_without_content_size():
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(50 * 1024 * 1024))
    assert len(frame) < 10_000
    with pytest.raises(comp.DecompressedSizeExceeded):
        decompress(ZSTD, frame, max_size=1 << 20)
    lz = lz4.frame.compress(bytes(50 * 1024 * 1024), store_size=False)
    with pytest.raises(comp.DecompressedSizeExceeded):
        decompress(LZ4, lz, max_size=1 << 20)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_corrupt_input_raises_protocol_error(codec):
    data = b"some data to compress " * 300
    packed = compress(codec, data)
    candidates = [packed[: len(packed) // 2], packed[:-1], b"\x00" * 40, os.urandom(64), b"\x01"]
    flipped = bytearray(packed)
    flipped[len(flipped) // 2] ^= 0xFF
    candidates.append(bytes(flipped))
    for bad in candidates:
        try:
            out = decompress(codec, bad)
        except KafkaProtocolError:
            continue
        # A flipped byte inside literals may still decode; it must not decode to the original.
        assert out != data or bad == packed


def test_decompress_into_appends_and_restores_on_error():
    out = OutputBuffer(16)
    assert decompress_into(NONE, b"head", out) == 4
    assert decompress_into(LZ4, compress(LZ4, b"A" * 100_000), out) == 100_000
    assert decompress_into(ZSTD, compress(ZSTD, b"B" * 10), out) == 10
    size = out.size
    with pytest.raises(KafkaProtocolError):
        decompress_into(ZSTD, b"garbage!", out)
    with pytest.raises(KafkaProtocolError):
        decompress_into(GZIP, compress(GZIP, b"x" * 5000), out, max_size=100)
    assert out.size == size
    assert out.tobytes() == b"head" + b"A" * 100_000 + b"B" * 10
    out.reset()
    assert out.size == 0 and out.capacity >= 100_014


def test_gzip_concatenated_members_and_zlib_errors():
    data = gzip.compress(b"one ") + gzip.compress(b"two")
    assert decompress(GZIP, data) == b"one two"
    with pytest.raises(KafkaProtocolError):
        decompress(GZIP, zlib.compress(b"not gzip framing"))


def test_unknown_codec():
    with pytest.raises(KafkaProtocolError):
        decompress(6, b"x")
    with pytest.raises(KafkaProtocolError):
        compress(7, b"x")
    with pytest.raises(KafkaProtocolError):
        decompress(LZ4, b"x", max_size=0)
