"""v2 record batches -> columns: the column-wise field decode and control records; where
records start is found by :mod:`.records_starts` (the steps: kafka_ds.protocol.records)."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from ..errors import KafkaProtocolError
from . import compression as _comp
from .compression import DecompressedSizeExceeded
from .records_arrays import _binary_to_string, _headers_array, _take_binary, int_array
from .records_layout import (
    _MIN_RECORD_SIZE,
    HEADERS_TYPE,
    TIMESTAMP_TYPE,
    V2_HEADER_SIZE,
    _corrupt,
    _INT16x2,
)
from .records_starts import _find_starts, _release_work_buffer, _work_buffer, _zvarints

_VECTOR_HEADER_ROUNDS = 32  # header slots decoded vectorised per record


# --- v2 decode ------------------------------------------------------------------------------


class _Batch:
    __slots__ = ("pos", "end", "base", "count", "codec", "log_append", "first_ts", "max_ts")

    def __init__(self, pos, end, base, count, codec, log_append, first_ts, max_ts):
        self.pos = pos
        self.end = end
        self.base = base
        self.count = count
        self.codec = codec
        self.log_append = log_append
        self.first_ts = first_ts
        self.max_ts = max_ts


# Compressed batches are decompressed and decoded in chunks of about this many
# records: the field decode makes ~40 numpy passes over per-record int64 arrays and
# gathers from the decompressed bytes, and a chunk decoded right after its
# decompression finds both in the core's L2 cache (benchmarks/bench_decode.py compares
# it with decompressing the whole response first).  Uncompressed input gains nothing
# from it (not chunked).
_CHUNK_RECORDS = 32768
_CHUNK_BYTES = 4 << 20  # stored (possibly compressed) bytes per chunk
_MAX_BUFFER = (1 << 31) - 64  # int32 Arrow offsets


def _chunk_bounds(batches):
    """``[(first, stop), ...]`` batch index runs of about ``_CHUNK_RECORDS`` records."""
    bounds = []
    first = recs = size = 0
    for i, b in enumerate(batches):
        recs += b.count
        size += b.end - b.pos
        if recs >= _CHUNK_RECORDS or size >= _CHUNK_BYTES:
            bounds.append((first, i + 1))
            first = i + 1
            recs = size = 0
    if first < len(batches):
        bounds.append((first, len(batches)))
    return bounds


class _Fields:
    """Per-record positions and values of one decode chunk (numpy arrays)."""

    __slots__ = (
        "key_start",
        "key_len",
        "value_start",
        "value_len",
        "offsets",
        "ts",
        "ts_type",
        "hrec",
        "hcnt",
        "hks",
        "hkl",
        "hvs",
        "hvl",
    )
    key_start: np.ndarray
    key_len: np.ndarray
    value_start: np.ndarray
    value_len: np.ndarray
    offsets: np.ndarray
    ts: np.ndarray
    ts_type: np.ndarray | None  # None: every record CREATE_TIME (filled in on merge)
    hrec: np.ndarray | None  # records with headers; None: no record has any
    hcnt: np.ndarray
    hks: np.ndarray
    hkl: np.ndarray
    hvs: np.ndarray
    hvl: np.ndarray


def _decode_chunk(buf, walk_view, batches, first, S, E, counts, bases, fail_batch) -> _Fields:
    """Find the records of ``batches[first:first + len(S)]`` (regions ``[S, E)`` of
    ``buf``) and decode their fields."""
    nb = len(S)

    def fail(i, message):
        fail_batch(first + i, message)

    # Every record takes at least 7 bytes: reject absurd counts before work.
    too_many = np.flatnonzero(counts * _MIN_RECORD_SIZE > (E - S))
    if too_many.size:
        fail(
            int(too_many[0]),
            f"record count {int(counts[too_many[0]])} does not fit "
            f"in {int((E - S)[too_many[0]])} bytes",
        )

    starts, length, n = _find_starts(buf, lambda s, e: (walk_view, 0), S, E, counts, fail)
    R = len(starts)
    bad = np.zeros(R, dtype=bool)

    if length is None:
        length, n = _zvarints(buf, starts, bad)
    p = starts + n
    rec_end = p + length
    p += 1  # attributes (unused)
    ts_delta, n = _zvarints(buf, p, bad, max_bytes=10)
    p += n
    off_delta, n = _zvarints(buf, p, bad)
    p += n
    key_len, n = _zvarints(buf, p, bad)
    key_start = p + n
    p = key_start + np.maximum(key_len, 0)
    value_len, n = _zvarints(buf, p, bad)
    value_start = p + n
    p = value_start + np.maximum(value_len, 0)
    header_count, n = _zvarints(buf, p, bad)
    p += n
    bad |= (key_len < -1) | (value_len < -1) | (header_count < 0)

    f = _Fields()
    f.hrec = None
    if header_count.any():
        hrec = np.flatnonzero(header_count > 0)
        hcnt = header_count[hrec]
        # each header takes at least two bytes
        over = hcnt * 2 > (rec_end[hrec] - p[hrec])
        if over.any():
            bad[hrec[over]] = True
            hcnt = np.where(over, 0, hcnt)
        hpos, f.hks, f.hkl, f.hvs, f.hvl = _decode_headers(
            buf, p[hrec], hcnt, rec_end[hrec], bad, hrec
        )
        p[hrec] = hpos
        f.hrec, f.hcnt = hrec, hcnt
    bad |= p != rec_end
    if bad.any():
        where = int(np.flatnonzero(bad)[0])
        batch_of = int(np.searchsorted(np.cumsum(counts), where, side="right"))
        fail(
            batch_of,
            f"inconsistent record structure (record "
            f"{where - int(counts[:batch_of].sum())} of the batch)",
        )

    # offsets, timestamps
    offsets = np.repeat(bases, counts)
    offsets += off_delta
    chunk = batches[first : first + nb]
    log_append = np.fromiter((b.log_append for b in chunk), dtype=bool, count=nb)
    first_ts = np.fromiter(
        (b.max_ts if b.log_append else b.first_ts for b in chunk), dtype=np.int64, count=nb
    )
    ts = np.repeat(first_ts, counts)
    if log_append.any():
        ts_delta = ts_delta * np.repeat(~log_append, counts)
        f.ts_type = np.repeat(log_append.astype(np.int32), counts)
    else:
        f.ts_type = None  # all CREATE_TIME
    ts += ts_delta
    f.key_start, f.key_len, f.value_start, f.value_len = key_start, key_len, value_start, value_len
    f.offsets, f.ts = offsets, ts
    return f


def _merge_fields(parts) -> _Fields:
    """One :class:`_Fields` for all chunks (record indexes of headers made global)."""
    if len(parts) == 1:
        f = parts[0]
        if f.ts_type is None:
            f.ts_type = np.zeros(len(f.offsets), dtype=np.int32)
        return f
    out = _Fields()
    for name in ("key_start", "key_len", "value_start", "value_len", "offsets", "ts"):
        setattr(out, name, np.concatenate([getattr(f, name) for f in parts]))
    out.ts_type = np.concatenate(
        [
            np.zeros(len(f.offsets), dtype=np.int32) if f.ts_type is None else f.ts_type
            for f in parts
        ]
    )
    out.hrec = None
    if any(f.hrec is not None for f in parts):
        base = 0
        hrec, hcnt, hks, hkl, hvs, hvl = [], [], [], [], [], []
        for f in parts:
            if f.hrec is not None:
                hrec.append(f.hrec + base)
                hcnt.append(f.hcnt)
                hks.append(f.hks)
                hkl.append(f.hkl)
                hvs.append(f.hvs)
                hvl.append(f.hvl)
            base += len(f.offsets)
        out.hrec, out.hcnt = np.concatenate(hrec), np.concatenate(hcnt)
        out.hks, out.hkl = np.concatenate(hks), np.concatenate(hkl)
        out.hvs, out.hvl = np.concatenate(hvs), np.concatenate(hvl)
    return out


def _decode_v2_segment(
    data, mv, batches, topic, partition, fetch_offset, include_headers, max_decompressed_size
):
    """Column dict for a run of v2 batches (all with count > 0).

    The batches are decoded in chunks of ~``_CHUNK_RECORDS`` records (compressed
    chunks are decompressed right before their decode, back to back into one work
    buffer); the key/value/header bytes are then copied out with one Arrow ``take``
    per column over the whole segment.
    """
    nb = len(batches)
    counts = np.fromiter((b.count for b in batches), dtype=np.int64, count=nb)
    bases = np.fromiter((b.base for b in batches), dtype=np.int64, count=nb)

    def fail_batch(i, message):
        raise _corrupt(topic, partition, batches[i].base, message)

    compressed = not all(b.codec == 0 for b in batches)
    ob = None
    parts = []
    try:
        if not compressed:
            buf = np.frombuffer(mv, dtype=np.uint8)
            if len(buf) >= _MAX_BUFFER:
                raise KafkaProtocolError("record data larger than 2 GiB in one fetch")
            S = np.fromiter((b.pos + V2_HEADER_SIZE for b in batches), dtype=np.int64, count=nb)
            E = np.fromiter((b.end for b in batches), dtype=np.int64, count=nb)
            walk_view = mv  # the Python walk indexes the input in place: no copy
        else:
            ob = _work_buffer()
            ob.reserve(sum(max(4 * (b.end - b.pos), 1 << 12) for b in batches))
            S = np.empty(nb, dtype=np.int64)
            E = np.empty(nb, dtype=np.int64)
        # Uncompressed input is decoded in one piece: chunking only pays when it lets
        # each chunk be decoded right after its decompression, still in cache.
        for c0, c1 in _chunk_bounds(batches) if compressed else [(0, nb)]:
            if compressed:
                assert ob is not None  # compressed: the work buffer taken above
                for i in range(c0, c1):
                    b = batches[i]
                    S[i] = ob.size
                    region = mv[b.pos + V2_HEADER_SIZE : b.end]
                    try:
                        _comp.decompress_into(b.codec, region, ob, max_size=max_decompressed_size)
                    except DecompressedSizeExceeded as exc:
                        raise DecompressedSizeExceeded(
                            f"topic {topic!r} partition {partition} offset {b.base}: {exc}"
                        ) from None
                    except KafkaProtocolError as exc:
                        fail_batch(i, str(exc))
                    E[i] = ob.size
                ob.pad()
                buf = ob.array
                if len(buf) >= _MAX_BUFFER:
                    raise KafkaProtocolError("record data larger than 2 GiB in one fetch")
                walk_view = buf.data  # a memoryview of the array, no copy
            parts.append(
                _decode_chunk(
                    buf,
                    walk_view,
                    batches,
                    c0,
                    S[c0:c1],
                    E[c0:c1],
                    counts[c0:c1],
                    bases[c0:c1],
                    fail_batch,
                )
            )
        pabuf = pa.py_buffer(ob.array if ob is not None else mv)
        f = _merge_fields(parts)
        assert f.ts_type is not None  # _merge_fields fills it in
        parts.clear()
        offsets, ts, ts_type = f.offsets, f.ts, f.ts_type
        key_start, key_len, value_start, value_len = (
            f.key_start,
            f.key_len,
            f.value_start,
            f.value_len,
        )
        R = len(offsets)

        keep = None
        if bases[0] < fetch_offset or (bases < fetch_offset).any():
            keep = offsets >= fetch_offset
            if keep.all():
                keep = None
        if keep is not None:
            sel = np.flatnonzero(keep)
            offsets = offsets[sel]
            ts = ts[sel]
            ts_type = ts_type[sel]
            key_start, key_len = key_start[sel], key_len[sel]
            value_start, value_len = value_start[sel], value_len[sel]

        ts *= 1000
        cols = {
            "key": _take_binary(pabuf, key_start, key_len),
            "value": _take_binary(pabuf, value_start, value_len),
            "offset": int_array(offsets, pa.int64()),
            "timestamp": int_array(ts, TIMESTAMP_TYPE),
            "timestampType": int_array(ts_type, pa.int32()),
        }
        if include_headers:
            if f.hrec is None:
                cols["headers"] = pa.nulls(len(offsets), HEADERS_TYPE)
            else:
                hrec, hcnt, hks, hkl, hvs, hvl = f.hrec, f.hcnt, f.hks, f.hkl, f.hvs, f.hvl
                rec_counts = np.zeros(R, dtype=np.int64)
                rec_counts[hrec] = hcnt
                if keep is not None:
                    hkeep = np.repeat(keep[hrec], hcnt)
                    hks, hkl, hvs, hvl = hks[hkeep], hkl[hkeep], hvs[hkeep], hvl[hkeep]
                    rec_counts = rec_counts[sel]
                hkeys = _binary_to_string(_take_binary(pabuf, hks, hkl, nulls_possible=False))
                hvals = _take_binary(pabuf, hvs, hvl)
                cols["headers"] = _headers_array(rec_counts, hkeys, hvals)
        return cols
    finally:
        if ob is not None:
            _release_work_buffer(ob)


def _decode_headers(buf, pos, counts, rec_end, bad, rec_index):
    """Decode the headers of the records at ``pos`` (one lane per record).

    Returns the end position per record and, per header in record-major
    order, key start/length and value start/length.
    """
    nrec = len(pos)
    total = int(counts.sum())
    first = np.zeros(nrec, dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    hks = np.zeros(total, dtype=np.int64)
    hkl = np.zeros(total, dtype=np.int64)
    hvs = np.zeros(total, dtype=np.int64)
    hvl = np.zeros(total, dtype=np.int64)
    q = pos.copy()
    lanes = np.flatnonzero(counts > 0)
    maxc = int(counts.max(initial=0))
    for j in range(min(maxc, _VECTOR_HEADER_ROUNDS)):
        if j:
            lanes = lanes[counts[lanes] > j]
        qq = q[lanes]
        kl, n = _zvarints(buf, qq, bad, lanes=rec_index[lanes])
        ks = qq + n
        qq = ks + np.maximum(kl, 0)
        vl, n = _zvarints(buf, qq, bad, lanes=rec_index[lanes])
        vs = qq + n
        qq = vs + np.maximum(vl, 0)
        wrong = (kl < 0) | (vl < -1) | (qq > rec_end[lanes])
        if wrong.any():
            bad[rec_index[lanes[wrong]]] = True
            qq = np.where(wrong, rec_end[lanes], qq)
        slot = first[lanes] + j
        hks[slot] = ks
        hkl[slot] = kl
        hvs[slot] = vs
        hvl[slot] = vl
        q[lanes] = qq
    if maxc > _VECTOR_HEADER_ROUNDS:
        raw = memoryview(buf)
        for lane in np.flatnonzero(counts > _VECTOR_HEADER_ROUNDS).tolist():
            p = int(q[lane])
            end = int(rec_end[lane])
            at = int(first[lane])
            try:
                for j in range(_VECTOR_HEADER_ROUNDS, int(counts[lane])):
                    kl, p = _py_zvarint(raw, p)
                    ks = p
                    p += max(kl, 0)
                    vl, p = _py_zvarint(raw, p)
                    vs = p
                    p += max(vl, 0)
                    if kl < 0 or vl < -1 or p > end:
                        raise IndexError
                    hks[at + j], hkl[at + j], hvs[at + j], hvl[at + j] = ks, kl, vs, vl
            except IndexError:
                bad[rec_index[lane]] = True
                p = end
            q[lane] = p
    return q, hks, hkl, hvs, hvl


def _py_zvarint(b, p):
    u = 0
    shift = 0
    while True:
        v = b[p]
        p += 1
        u |= (v & 0x7F) << shift
        if v < 0x80:
            return (u >> 1) ^ -(u & 1), p
        shift += 7
        if shift >= 35:
            raise IndexError


def _control_type(mv, b: _Batch, topic, partition, max_size):
    """Type of the first control record of a control batch (0 abort, 1 commit), or None."""
    if b.count <= 0:
        return None
    region = mv[b.pos + V2_HEADER_SIZE : b.end]
    try:
        raw = region if b.codec == 0 else _comp.decompress(b.codec, region, max_size)
        p = 0
        _length, p = _py_zvarint(raw, p)
        p += 1
        _tsd, p = _py_zvarint(raw, p)
        _od, p = _py_zvarint(raw, p)
        klen, p = _py_zvarint(raw, p)
        if klen < 4 or p + klen > len(raw):
            raise IndexError
        _version, ctype = _INT16x2.unpack_from(raw, p)
    except (IndexError, KafkaProtocolError, struct.error):
        raise _corrupt(topic, partition, b.base, "unreadable control record") from None
    return ctype
