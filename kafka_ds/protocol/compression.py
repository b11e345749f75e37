"""Kafka compression codecs: pure functions, no I/O.

Codec ids are the values of the low three bits of a record batch's (or legacy
wrapper message's) ``attributes``: none=0, gzip=1, snappy=2, lz4=3, zstd=4.

* gzip   -- RFC 1952 gzip members (what ``GZIPOutputStream`` writes), via zlib;
  concatenated members are accepted.
* snappy -- raw snappy blocks *and* the xerial framing the Java client writes
  (``b"\\x82SNAPPY\\x00"`` + int32 version + int32 compat, then blocks of
  int32 length + raw snappy), told apart by the magic bytes.
* lz4    -- the LZ4 *frame* format (KIP-57).  Legacy magic-0 messages carry a
  frame whose header checksum was computed the broken pre-KIP-57 way; pass
  ``legacy_lz4=True`` to accept it (the Java client ignores that checksum too;
  ``lz4_legacy.py`` repairs it).
* zstd   -- zstd frames, with or without the content size in the frame header.

Every decompression is capped at ``max_size`` output bytes: exceeding it
raises :class:`KafkaProtocolError` (decompression bomb), and so does corrupt
or truncated input (library exceptions are wrapped, never leaked).

:func:`decompress_into` appends into a reusable, growable ``OutputBuffer``
(``output_buffer.py``) so that the record decoder can gather several batches into
one numpy buffer without an intermediate ``bytes`` per batch.  The into-buffer fast
paths use ``cramjam`` (a dependency of python-snappy >= 0.7) when it is importable;
the ``lz4.frame`` / ``zstandard`` / ``python-snappy`` packages are used otherwise
and for compression.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from ..errors import KafkaProtocolError
from .lz4_legacy import fix_legacy_lz4_header
from .output_buffer import OutputBuffer

try:  # pragma: no cover - exercised implicitly
    import cramjam as _cramjam
except ImportError:  # pragma: no cover
    _cramjam = None  # type: ignore[assignment]

try:
    import lz4.frame as _lz4f
except ImportError:  # pragma: no cover
    _lz4f = None

try:
    import zstandard as _zstd
except ImportError:  # pragma: no cover
    _zstd = None  # type: ignore[assignment]

try:
    import snappy as _snappy
except ImportError:  # pragma: no cover
    _snappy = None

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "codec_name",
    "codec_id",
    "compress",
    "decompress",
    "decompress_into",
    "DecompressedSizeExceeded",
    "XERIAL_MAGIC",
]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
_IDS = {name: i for i, name in enumerate(CODEC_NAMES)}

#: Default cap on the output of one decompression (one record batch).
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_SIZE = 32 * 1024  # what the Java client (SnappyOutputStream) uses
_INT32 = struct.Struct(">i")


def codec_name(codec: int) -> str:
    """``0..4`` -> ``"none" | "gzip" | "snappy" | "lz4" | "zstd"``."""
    if isinstance(codec, int) and 0 <= codec < len(CODEC_NAMES):
        return CODEC_NAMES[codec]
    raise KafkaProtocolError(f"unknown compression codec id {codec!r}")


def codec_id(name) -> int:
    """``"none" | "gzip" | "snappy" | "lz4" | "zstd"`` (any case) -> ``0..4``.

    ``None`` and ``"uncompressed"`` mean none; an int that is already a valid
    id is returned unchanged.
    """
    if name is None:
        return NONE
    if isinstance(name, int) and not isinstance(name, bool):
        codec_name(name)
        return name
    if isinstance(name, str):
        key = name.strip().lower()
        if key == "uncompressed":
            return NONE
        if key in _IDS:
            return _IDS[key]
    raise KafkaProtocolError(
        f"unknown compression codec {name!r}; expected one of {', '.join(CODEC_NAMES)}"
    )


# --- helpers --------------------------------------------------------------------


class DecompressedSizeExceeded(KafkaProtocolError):
    """Decompressed output would exceed ``max_size`` (likely a decompression bomb)."""


def _too_large(codec: int, max_size: int) -> KafkaProtocolError:
    return DecompressedSizeExceeded(
        f"{CODEC_NAMES[codec]} data decompresses to more than max_size={max_size} bytes "
        "(decompression bomb or max size too small)"
    )


def _corrupt(codec: int, exc) -> KafkaProtocolError:
    return KafkaProtocolError(f"corrupt {CODEC_NAMES[codec]} data: {exc}")


def _is_output_full(exc) -> bool:
    # cramjam's *_into functions report a too-small output buffer this way.
    return "whole buffer" in str(exc)


def _bytes_view(data):
    if isinstance(data, np.ndarray):
        return data.data.cast("B")
    mv = memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


# --- per-codec decompression into an OutputBuffer -------------------------------


def _gzip_into(data, out: OutputBuffer, max_size: int) -> int:
    start = out.size
    total = 0
    rest = data

    def keep(piece):
        nonlocal total
        if len(piece) + total > max_size:
            out.size = start
            raise _too_large(GZIP, max_size)
        out.append(piece)
        total += len(piece)

    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            keep(d.decompress(rest, max_size - total + 1))
            while not d.eof and d.unconsumed_tail:
                keep(d.decompress(d.unconsumed_tail, max_size - total + 1))
            if not d.eof:
                keep(d.flush())
        except zlib.error as exc:
            out.size = start
            raise _corrupt(GZIP, exc) from None
        if not d.eof:
            out.size = start
            raise _corrupt(GZIP, "truncated gzip stream")
        rest = d.unused_data
        # Concatenated gzip members (GZIPInputStream reads them all); tolerate
        # trailing zero padding.
        if not rest or not rest.strip(b"\x00"):
            return total


def _snappy_raw_into(block, out: OutputBuffer, max_size: int) -> int:
    if _cramjam is not None:
        try:
            n = _cramjam.snappy.decompress_raw_len(block)
        except Exception as exc:
            raise _corrupt(SNAPPY, exc) from None
        if n > max_size:
            raise _too_large(SNAPPY, max_size)
        out.reserve(n)
        try:
            got = _cramjam.snappy.decompress_raw_into(block, out.free_view(n))
        except Exception as exc:
            raise _corrupt(SNAPPY, exc) from None
        if got != n:
            raise _corrupt(SNAPPY, f"expected {n} bytes, got {got}")
        out.size += n
        return n
    try:  # pragma: no cover - cramjam is a python-snappy dependency
        raw = _snappy.uncompress(bytes(block))
    except Exception as exc:  # pragma: no cover
        raise _corrupt(SNAPPY, exc) from None
    if len(raw) > max_size:  # pragma: no cover
        raise _too_large(SNAPPY, max_size)
    out.append(raw)  # pragma: no cover
    return len(raw)  # pragma: no cover


def _snappy_into(data, out: OutputBuffer, max_size: int) -> int:
    mv = _bytes_view(data)
    if bytes(mv[:8]) != XERIAL_MAGIC:
        return _snappy_raw_into(mv, out, max_size)
    if len(mv) < 16:
        raise _corrupt(SNAPPY, "truncated xerial header")
    start = out.size
    total = 0
    pos = 16
    end = len(mv)
    try:
        while pos < end:
            if pos + 4 > end:
                raise _corrupt(SNAPPY, "truncated xerial block length")
            (blen,) = _INT32.unpack_from(mv, pos)
            pos += 4
            if blen < 0 or pos + blen > end:
                raise _corrupt(SNAPPY, f"xerial block length {blen} exceeds the data")
            total += _snappy_raw_into(mv[pos : pos + blen], out, max_size - total)
            pos += blen
    except DecompressedSizeExceeded:
        out.size = start
        raise _too_large(SNAPPY, max_size) from None
    except KafkaProtocolError:
        out.size = start
        raise
    return total


def _lz4_into(data, out: OutputBuffer, max_size: int, legacy: bool) -> int:
    if legacy:
        data = fix_legacy_lz4_header(data)
    if _cramjam is not None:
        return _cramjam_into(_cramjam.lz4.decompress_into, LZ4, data, out, max_size)
    try:  # pragma: no cover - fallback without cramjam
        d = _lz4f.LZ4FrameDecompressor()
        raw = d.decompress(bytes(data), max_length=max_size + 1)
    except Exception as exc:  # pragma: no cover
        raise _corrupt(LZ4, exc) from None
    if len(raw) > max_size:  # pragma: no cover
        raise _too_large(LZ4, max_size)
    if not d.eof or d.unused_data:  # pragma: no cover
        raise _corrupt(LZ4, "truncated frame or trailing data")
    out.append(raw)  # pragma: no cover
    return len(raw)  # pragma: no cover


def _zstd_into(data, out: OutputBuffer, max_size: int) -> int:
    if _cramjam is not None:
        return _cramjam_into(_cramjam.zstd.decompress_into, ZSTD, data, out, max_size)
    # pragma: no cover - fallback without cramjam: stream with a hard cap.
    try:  # pragma: no cover
        dobj = _zstd.ZstdDecompressor().decompressobj()
        raw = bytearray()
        mv = _bytes_view(data)
        for i in range(0, len(mv), 4096):
            raw += dobj.decompress(mv[i : i + 4096])
            if len(raw) > max_size:
                raise _too_large(ZSTD, max_size)
        if not dobj.eof:
            raise _corrupt(ZSTD, "truncated frame")
    except KafkaProtocolError:  # pragma: no cover
        raise
    except Exception as exc:  # pragma: no cover
        raise _corrupt(ZSTD, exc) from None
    out.append(raw)  # pragma: no cover
    return len(raw)  # pragma: no cover


def _cramjam_into(fn, codec: int, data, out: OutputBuffer, max_size: int) -> int:
    """Decompress with a cramjam ``*_into`` function, growing the window.

    The window starts at a few times the input size; cramjam stops writing
    when the window is full (it never buffers the whole output), so a bomb
    costs at most ``max_size`` bytes of buffer.
    """
    n_in = len(data)
    if n_in == 0:
        raise _corrupt(codec, "empty input")
    window = min(max_size, max(4 * n_in + 1024, 1 << 16))
    while True:
        out.reserve(window)
        try:
            got = fn(data, out.free_view(window))
        except Exception as exc:
            if not _is_output_full(exc):
                raise _corrupt(codec, exc) from None
            if window >= max_size:
                raise _too_large(codec, max_size) from None
            window = min(max_size, window * 4)
            continue
        out.size += got
        return got


def decompress_into(
    codec: int,
    data,
    out: OutputBuffer,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    legacy_lz4: bool = False,
) -> int:
    """Append the decompressed ``data`` to ``out``; return the byte count.

    On error ``out.size`` is left where it was.
    """
    if max_size is None or max_size <= 0:
        raise KafkaProtocolError(f"max_size must be positive, got {max_size!r}")
    start = out.size
    try:
        if codec == NONE:
            if len(data) > max_size:
                raise _too_large(NONE, max_size)
            out.append(data)
            return len(data)
        if codec == GZIP:
            return _gzip_into(data, out, max_size)
        if codec == SNAPPY:
            return _snappy_into(data, out, max_size)
        if codec == LZ4:
            return _lz4_into(data, out, max_size, legacy_lz4)
        if codec == ZSTD:
            return _zstd_into(data, out, max_size)
    except KafkaProtocolError:
        out.size = start
        raise
    except MemoryError:
        out.size = start
        raise _too_large(codec, max_size) from None
    raise KafkaProtocolError(f"unknown compression codec id {codec!r}")


def decompress(
    codec: int, data, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE, *, legacy_lz4: bool = False
) -> bytes:
    """Decompress ``data`` (bytes-like) compressed with ``codec``; capped at ``max_size``."""
    if codec == NONE:
        if len(data) > max_size:
            raise _too_large(NONE, max_size)
        return bytes(data)
    out = OutputBuffer(min(max_size, max(4 * len(data), 1 << 12)))
    decompress_into(codec, data, out, max_size=max_size, legacy_lz4=legacy_lz4)
    return out.tobytes()


# --- compression ------------------------------------------------------------------


def _snappy_raw(data) -> bytes:
    if _cramjam is not None:
        return bytes(_cramjam.snappy.compress_raw(data))
    return _snappy.compress(bytes(data))  # pragma: no cover


def compress(codec: int, data, level: int | None = None, *, xerial: bool = True) -> bytes:
    """Compress ``data`` for a record batch.

    snappy uses the xerial framing (as the Java producer does) unless
    ``xerial=False``; lz4 writes one frame with independent 64 KiB blocks and
    no content size (as ``KafkaLZ4BlockOutputStream`` does).
    """
    mv = _bytes_view(data)
    if codec == NONE:
        return bytes(mv)
    if codec == GZIP:
        c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(mv) + c.flush()
    if codec == SNAPPY:
        if not xerial:
            return _snappy_raw(mv)
        parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
        for i in range(0, len(mv), _XERIAL_BLOCK_SIZE):
            block = _snappy_raw(mv[i : i + _XERIAL_BLOCK_SIZE])
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == LZ4:
        return _lz4f.compress(
            mv,
            compression_level=0 if level is None else level,
            block_size=_lz4f.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        return _zstd.ZstdCompressor(level=3 if level is None else level).compress(mv)
    raise KafkaProtocolError(f"unknown compression codec id {codec!r}")
