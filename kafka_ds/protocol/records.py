"""Kafka record batches -> Apache Arrow, column-wise, and back.  Pure, no I/O.

Decoding (:func:`decode_records`) takes one partition's ``records`` field from a
Fetch response (any mix of v2 record batches and legacy v0/v1 message sets; the
last batch may be truncated) and returns a :class:`pyarrow.RecordBatch` with the
columns Spark's Kafka source exposes for the record itself::

    key binary, value binary, offset int64, timestamp timestamp[us, UTC],
    timestampType int32 [, headers list<struct<key: string, value: binary>>]

No Python object is created per record on the v2 path:

1. the batch headers are parsed in a short Python loop (one ``struct`` call and
   one CRC-32C call per batch, on the original compressed bytes);
2. the record regions of all batches are made contiguous-ish in one buffer:
   uncompressed input is used in place, compressed batches are decompressed
   back to back into one reusable numpy buffer;
3. the record starts are found -- the only sequential step (each record begins
   with its varint length).  First speculatively and vectorised: records
   without headers end with a 0x00 header count and start with a varint length
   followed by a 0x00 attributes byte, so the starts are among the positions
   after "00 <varint> 00" patterns; the candidates are verified as a chain
   (``start[i] + size[i] == start[i+1]`` from the batch's first byte to its
   last, with the exact record count), which proves them right whatever the
   payload contains.  Batches that fail (records with headers) get a second
   vectorised try: every start is "<1-3 byte varint> 00", impossible
   candidates are pruned, the survivors must pass the same proof.  Only what
   is still unproven (e.g. huge records, payloads crafted to look like
   records) is walked by a tight Python loop with lookup tables for 1- and
   2-byte varints;
4. every other field is decoded for all records of all batches at once with
   numpy (zigzag varints via a 64 Ki-entry table for the 1-2 byte case);
5. key, value, header key and header value columns are built with one
   ``take`` each from an "interleaved" binary array whose offsets point into
   the work buffer (``[start0, end0, start1, end1, ...]``): Arrow copies the
   bytes with one memcpy per value, null keys/values get validity bits.

Conventions (matching what Spark's Kafka source yields through the Java consumer):

* legacy v0 messages have no timestamp: ``timestamp`` is -1 ms (i.e.
  1969-12-31T23:59:59.999 UTC, what ``new java.sql.Timestamp(-1)`` gives) and
  ``timestampType`` is -1 (``NO_TIMESTAMP_TYPE``), not null;
* ``headers`` is null (not an empty list) for a record without headers, like
  Spark; header keys that are not valid UTF-8 are decoded with U+FFFD
  replacement (as Java's ``new String(bytes, UTF_8)`` does);
* ``next_offset`` never goes below ``fetch_offset``.

Encoding (:func:`encode_record_batch`) builds one v2 batch from Arrow arrays,
also column-wise: varints are sized and written with numpy, and the record
bytes are assembled with one Arrow ``take`` over [per-record varint pieces,
keys, values, headers] in output order.
"""
from __future__ import annotations

import heapq
import struct
import threading
import time
import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c as _crc32c

from . import compression as _comp
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, DecompressedSizeExceeded, OutputBuffer
from .errors import CorruptRecordError, KafkaProtocolError

__all__ = [
    "DecodeResult", "decode_records", "encode_record_batch", "record_schema",
    "TIMESTAMP_TYPE", "HEADERS_TYPE", "HEADER_STRUCT_TYPE",
    "NO_TIMESTAMP_TYPE", "CREATE_TIME", "LOG_APPEND_TIME",
]

# --- schema ------------------------------------------------------------------------

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
HEADER_STRUCT_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS_TYPE = pa.list_(HEADER_STRUCT_TYPE)

NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME = -1, 0, 1
NO_TIMESTAMP = -1

_SCHEMA_NO_HEADERS = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
])
_SCHEMA_HEADERS = _SCHEMA_NO_HEADERS.append(pa.field("headers", HEADERS_TYPE))


def record_schema(include_headers: bool = True) -> pa.Schema:
    """The Arrow schema of :attr:`DecodeResult.batch`."""
    return _SCHEMA_HEADERS if include_headers else _SCHEMA_NO_HEADERS


# --- wire layout ---------------------------------------------------------------------

LOG_OVERHEAD = 12                         # baseOffset int64 + length int32
_OFFSET_LENGTH = struct.Struct(">qi")
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, firstTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_SIZE = _V2_HEADER.size          # 61
V2_MIN_BATCH_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD  # 49
_V2_CRC_OFFSET = 17
_V2_ATTRIBUTES_OFFSET = 21                # the CRC covers attributes .. end
_LEGACY_V0 = struct.Struct(">qiIbb")      # offset, size, crc, magic, attributes (18)
_LEGACY_V1 = struct.Struct(">qiIbbq")     # + timestamp (26)
_LEGACY_MIN_LENGTH = (14, 22)             # crc+magic+attr[+ts]+keylen+valuelen
_INT32 = struct.Struct(">i")
_INT16x2 = struct.Struct(">hh")

ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

_MIN_RECORD_BODY = 6    # attributes + 5 one-byte varints
_MIN_RECORD_SIZE = 7    # + the length varint
_ZERO_SCAN_MAX_AVG_RECORD = 640   # bytes; above this the Python walk is cheaper
_VECTOR_HEADER_ROUNDS = 32        # header slots decoded vectorised per record
_BIG = 1 << 62


@dataclass
class DecodeResult:
    """What :func:`decode_records` returns."""

    batch: pa.RecordBatch
    #: Offset to fetch next: last offset of the last complete batch + 1
    #: (control batches and fully dropped batches included), never below
    #: ``fetch_offset``; ``fetch_offset`` when no batch was complete.
    next_offset: int
    #: A partial batch at the end of the data was ignored.
    truncated: bool
    #: Rows in ``batch``.
    record_count: int
    #: Bytes of complete batches consumed from the start of the data.
    bytes_consumed: int


def _corrupt(topic, partition, offset, message) -> CorruptRecordError:
    return CorruptRecordError(
        f"corrupt record data in topic {topic!r} partition {partition} at offset {offset}: {message}")


# --- zigzag varint tables ------------------------------------------------------------

def _zigzag(u):
    return (u >> 1) ^ -(u & 1)


def _build_tables():
    idx = np.arange(1 << 16, dtype=np.int64)
    b0 = idx & 0xFF
    b1 = idx >> 8
    one = b0 < 0x80
    two = ~one & (b1 < 0x80)
    val = np.where(one, _zigzag(b0), _zigzag((b0 & 0x7F) | (b1 << 7)))
    size = np.where(one, 1, np.where(two, 2, 0))
    table2 = np.where(size > 0, (val << 2) | size, 0).astype(np.int32)
    table1 = _zigzag(np.arange(256, dtype=np.int64))
    u7 = np.arange(128)
    step1 = [int(1 + v) if v >= _MIN_RECORD_BODY else _BIG for v in _zigzag(u7)]
    u14 = np.arange(1 << 14)
    step2 = [int(2 + v) if v >= _MIN_RECORD_BODY else _BIG for v in _zigzag(u14)]
    return table1, table2, step1, step2


_ZV1, _ZV2, _STEP1, _STEP2 = _build_tables()


def _zvarints(buf, pos, bad, lanes=None, max_bytes=5):
    """Zigzag varints at every position of ``pos`` (int64 array).

    Returns ``(values int64, sizes)``; ``sizes`` is the int 1 when every varint
    is one byte.  Lanes whose varint is longer than ``max_bytes`` are flagged
    in ``bad`` (indexed through ``lanes`` when given).  Reads are clipped to
    the buffer; callers verify positions afterwards.
    """
    b0 = buf.take(pos, mode="clip")
    if b0.max(initial=0) < 0x80:
        return _ZV1.take(b0), 1
    b1 = buf.take(pos + 1, mode="clip")
    e = _ZV2.take(b0 | (b1.astype(np.uint16) << 8))
    values = (e >> 2).astype(np.int64)
    sizes = e & 3
    if not sizes.all():
        slow = np.flatnonzero(sizes == 0)
        p = pos[slow]
        u = (b0[slow] & 0x7F).astype(np.uint64) | ((b1[slow] & 0x7F).astype(np.uint64) << np.uint64(7))
        n = np.full(slow.size, 2, dtype=np.int64)
        cont = np.arange(slow.size)
        k = 2
        while cont.size:
            if k >= max_bytes:
                where = slow[cont] if lanes is None else lanes[slow[cont]]
                bad[where] = True
                break
            bb = buf.take(p[cont] + k, mode="clip")
            u[cont] |= (bb & 0x7F).astype(np.uint64) << np.uint64(7 * k)
            n[cont] += 1
            cont = cont[bb >= 0x80]
            k += 1
        values[slow] = _zigzag(u).view(np.int64)
        sizes[slow] = n
    return values, sizes


# --- record start discovery ------------------------------------------------------------

def _walk_long(b, p):
    """Slow step of the walk: record at ``p`` has a length varint of 3+ bytes."""
    u = 0
    shift = 0
    q = p
    while True:
        v = b[q]
        q += 1
        u |= (v & 0x7F) << shift
        if v < 0x80:
            break
        shift += 7
        if shift >= 35:
            return _BIG
    length = (u >> 1) ^ -(u & 1)
    if length < _MIN_RECORD_BODY:
        return _BIG
    return q + length


def _walk_region(b, s, e):
    """Record starts in ``b[s:e]`` by following the length varints.

    Returns ``(starts list, end position)``; the end position equals ``e``
    exactly when the region is consistent.
    """
    out = []
    ap = out.append
    step1 = _STEP1
    step2 = _STEP2
    p = s
    try:
        while p < e:
            ap(p)
            v = b[p]
            if v < 0x80:
                p += step1[v]
            else:
                w = b[p + 1]
                if w < 0x80:
                    p += step2[(v & 0x7F) | (w << 7)]
                else:
                    p = _walk_long(b, p)
    except IndexError:
        return out, -1
    return out, p


def _zero_positions(buf, S, E):
    """Sorted positions of the 0x00 bytes inside the regions ``[S[i], E[i])``."""
    lo = int(S[0])
    hi = int(E[-1])
    m = np.equal(buf[lo:hi], 0, out=_scratch_bool(hi - lo))
    # Bytes between regions (batch headers of in-place input) are not record bytes.
    for a, b in zip((E[:-1] - lo).tolist(), (S[1:] - lo).tolist()):
        if b > a:
            m[a:b] = False
    z = np.flatnonzero(m)
    z += lo
    return z


def _check_chains(c, nx, S, E, counts):
    """Per region: do the sorted candidates ``c`` form exactly its record chain?

    Region r is proven when its candidates ``c[ia:ib]`` start at ``S[r]``, are
    ``counts[r]`` many, each one's successor ``nx`` is the next candidate and
    the last one's is ``E[r]`` -- by induction from the region's first byte,
    they are then the record starts, whatever else the payload contains.
    """
    ia = np.searchsorted(c, S)
    ib = np.searchsorted(c, E)
    if len(c) == 0:
        return np.zeros(len(S), dtype=bool), ia
    link_bad = np.empty(len(c), dtype=np.int64)
    link_bad[0] = 0
    np.cumsum(nx[:-1] != c[1:], out=link_bad[1:])
    last = np.maximum(ib - 1, 0)
    head = np.minimum(ia, len(c) - 1)
    ok = (((ib - ia) == counts)
          & (c[head] == S)
          & (link_bad[last] == link_bad[head])   # ia may be len(c): clamped (fuzzing)
          & (nx[last] == E))
    return ok, ia


def _with_heads(cand, S):
    """Insert the region starts (first records) into the sorted candidates."""
    if not cand.size:
        return S.copy()
    ins = np.searchsorted(cand, S)
    dup = (ins < cand.size) & (cand[np.minimum(ins, cand.size - 1)] == S)
    return np.insert(cand, ins[~dup], S[~dup])


def _chains_zero_pairs(buf, z, S, E, counts):
    """Tier 1: records without headers end with a 0x00 header count and have a
    0x00 attributes byte after their length, so every start (but a batch's
    first) follows a "00 <1-3 byte varint> 00" pattern."""
    if z.size >= 2:
        g = np.diff(z)
        sel = np.flatnonzero((g >= 2) & (g <= 4))
        cand = z[sel] + 1
    else:
        cand = np.empty(0, dtype=np.int64)
    c = _with_heads(cand, S)
    scratch = np.zeros(len(c), dtype=bool)
    length, size = _zvarints(buf, c, scratch)
    nx = c + size + length
    ok, ia = _check_chains(c, nx, S, E, counts)
    return c, ia, ok, length, size


def _chains_attr_zero(buf, z, S, E, counts):
    """Tier 2 (records with headers): every start is a 1-3 byte varint followed
    by the 0x00 attributes byte.  Candidates that cannot be on a chain (their
    successor is not a candidate, or nothing points to them) are pruned for a
    few rounds; the survivors must then pass the same chain proof."""
    r = np.searchsorted(S, z, side="right") - 1
    z = z[(r >= 0) & (z < E[np.maximum(r, 0)])]
    z = z[buf.take(z - 1, mode="clip") < 0x80]
    c1 = z - 1
    z2 = z[buf.take(z - 2, mode="clip") >= 0x80]
    c2 = z2 - 2
    c3 = (z2 - 3)[buf.take(z2 - 3, mode="clip") >= 0x80]
    c = np.sort(np.concatenate((S, c1, c2, c3)), kind="stable")
    if len(c) > 1:
        c = c[np.concatenate(([True], c[1:] != c[:-1]))]
    lo = int(S[0])
    span = int(E[-1]) - lo + 1
    scratch = np.zeros(len(c), dtype=bool)
    length, size = _zvarints(buf, c, scratch)
    nx = c + size + length
    keep = (c >= lo) & (length >= _MIN_RECORD_BODY) & (nx <= E[-1])
    c, nx = c[keep], nx[keep]
    ok = np.zeros(len(S), dtype=bool)
    ia = np.searchsorted(c, S)
    head_mark = np.zeros(span, dtype=bool)
    head_mark[S - lo] = True
    rounds = 6
    for round_ in range(rounds + 1):
        ok, ia = _check_chains(c, nx, S, E, counts)
        if ok.all() or not len(c) or round_ == rounds:
            break
        mark = np.zeros(span, dtype=bool)
        mark[c - lo] = True
        mark[E - lo] = True
        alive = mark[nx - lo]                          # its successor exists
        pointed = np.zeros(span, dtype=bool)
        pointed[nx[alive] - lo] = True
        alive &= pointed[c - lo] | head_mark[c - lo]   # something points to it
        if alive.all():
            break
        c, nx = c[alive], nx[alive]
    return c, ia, ok


def _find_starts(buf, walk_bytes, S, E, counts, fail):
    """Start position of every record of every region, in order.

    Returns ``(starts, lengths, length_sizes)``; the last two are None unless
    the speculative tier 1 proved every region (they are reused then).
    ``fail(region_index, message)`` raises the error for an inconsistent region;
    ``walk_bytes(s, e)`` returns ``(bytes-like, base)`` for the Python walk.
    """
    total = int(counts.sum())
    nreg = len(S)
    proven = {}                       # region -> (candidates, first index)
    region_bytes = int((E - S).sum())
    if total >= 16 and region_bytes <= _ZERO_SCAN_MAX_AVG_RECORD * total:
        z = _zero_positions(buf, S, E)
        c, ia, ok, length, size = _chains_zero_pairs(buf, z, S, E, counts)
        if ok.all() and len(c) == total:
            return c, length, size
        for r in np.flatnonzero(ok).tolist():
            proven[r] = (c, int(ia[r]))
        todo = np.flatnonzero(~ok)
        if todo.size and int(counts[todo].sum()) >= 16:
            c2, ia2, ok2 = _chains_attr_zero(buf, z, S[todo], E[todo], counts[todo])
            for j in np.flatnonzero(ok2).tolist():
                proven[int(todo[j])] = (c2, int(ia2[j]))
    pieces = []
    for r in range(nreg):
        got = proven.get(r)
        if got is not None:
            cc, i0 = got
            piece = cc[i0:i0 + int(counts[r])]
            if len(piece) == counts[r]:        # (always, by construction)
                pieces.append(piece)
                continue
        s = int(S[r])
        e = int(E[r])
        b, base = walk_bytes(s, e)
        starts, end = _walk_region(b, s - base, e - base)
        if end != e - base or len(starts) != counts[r]:
            fail(r, f"record lengths do not add up to the batch ({len(starts)} records "
                    f"parsed, {int(counts[r])} declared)")
        arr = np.array(starts, dtype=np.int64)
        if base:
            arr += base
        pieces.append(arr)
    if not pieces:
        return np.empty(0, dtype=np.int64), None, None
    return np.concatenate(pieces), None, None


# --- Arrow helpers ------------------------------------------------------------------------

def _take_binary(pabuf, starts, lengths, nulls_possible=True):
    """Binary array of ``buffer[starts[i] : starts[i] + lengths[i]]`` (null if length < 0).

    ``starts`` must be increasing with non-overlapping values.  One Arrow take
    over an interleaved array copies the bytes; no Python object per value.
    """
    n = len(starts)
    if n == 0:
        return pa.array([], type=pa.binary())
    ln = np.maximum(lengths, 0) if nulls_possible else lengths
    offs = np.empty(2 * n, dtype=np.int32)
    offs[0::2] = starts
    offs[1::2] = starts + ln
    inter = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(offs), pabuf])
    out = pc.take(inter, pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)), boundscheck=False)
    if nulls_possible:
        valid = lengths >= 0
        if not valid.all():
            bufs = out.buffers()
            out = pa.Array.from_buffers(
                pa.binary(), n,
                [pa.py_buffer(np.packbits(valid, bitorder="little")), bufs[1], bufs[2]],
                offset=out.offset)
    return out


def _binary_to_string(arr):
    try:
        return arr.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowException):
        return pa.array([None if v is None else v.decode("utf-8", "replace")
                         for v in arr.to_pylist()], type=pa.string())


def _int_array(values, typ):
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)])


def _headers_array(counts, hkeys, hvalues):
    """list<struct<key string, value binary>>; null where a record has no headers."""
    n = len(counts)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    struct_arr = pa.StructArray.from_arrays([hkeys, hvalues], fields=list(HEADER_STRUCT_TYPE))
    has = counts > 0
    validity = None if has.all() else pa.py_buffer(np.packbits(has, bitorder="little"))
    return pa.Array.from_buffers(HEADERS_TYPE, n, [validity, pa.py_buffer(offsets)],
                                 children=[struct_arr])


def _empty_columns(include_headers):
    cols = {
        "key": pa.array([], pa.binary()), "value": pa.array([], pa.binary()),
        "offset": pa.array([], pa.int64()), "timestamp": pa.array([], TIMESTAMP_TYPE),
        "timestampType": pa.array([], pa.int32()),
    }
    if include_headers:
        cols["headers"] = pa.array([], HEADERS_TYPE)
    return cols


# --- work buffer ------------------------------------------------------------------------------

_tls = threading.local()
_KEEP_BUFFER_MAX = 64 << 20


def _work_buffer() -> OutputBuffer:
    ob = getattr(_tls, "buffer", None)
    if ob is None:
        ob = _tls.buffer = OutputBuffer(1 << 20)
    ob.reset()
    return ob


def _release_work_buffer(ob: OutputBuffer) -> None:
    if ob.capacity > _KEEP_BUFFER_MAX:
        _tls.buffer = None


def _scratch_bool(n: int):
    """A reusable (per thread) boolean scratch array of length ``n``."""
    arr = getattr(_tls, "bools", None)
    if arr is None or len(arr) < n:
        arr = np.empty(max(n, 1 << 20), dtype=bool)
        if n <= _KEEP_BUFFER_MAX:
            _tls.bools = arr
    return arr[:n]


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
# decompression finds both in the core's L2 cache.  Measured with 100-byte records
# in 5 MB (compressed) fetch responses: +13 % lz4, +15 % zstd over decompressing the
# whole response first.  Uncompressed input gains nothing from it (not chunked).
_CHUNK_RECORDS = 32768
_CHUNK_BYTES = 4 << 20        # stored (possibly compressed) bytes per chunk
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

    __slots__ = ("key_start", "key_len", "value_start", "value_len", "offsets", "ts",
                 "ts_type", "hrec", "hcnt", "hks", "hkl", "hvs", "hvl")


def _decode_chunk(buf, walk_view, batches, first, S, E, counts, bases, fail_batch) -> _Fields:
    """Find the records of ``batches[first:first + len(S)]`` (regions ``[S, E)`` of
    ``buf``) and decode their fields."""
    nb = len(S)

    def fail(i, message):
        fail_batch(first + i, message)

    # Every record takes at least 7 bytes: reject absurd counts before work.
    too_many = np.flatnonzero(counts * _MIN_RECORD_SIZE > (E - S))
    if too_many.size:
        fail(int(too_many[0]), f"record count {int(counts[too_many[0]])} does not fit "
                               f"in {int((E - S)[too_many[0]])} bytes")

    starts, length, n = _find_starts(buf, lambda s, e: (walk_view, 0), S, E, counts, fail)
    R = len(starts)
    bad = np.zeros(R, dtype=bool)

    if length is None:
        length, n = _zvarints(buf, starts, bad)
    p = starts + n
    rec_end = p + length
    p += 1                                    # attributes (unused)
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
        hpos, f.hks, f.hkl, f.hvs, f.hvl = _decode_headers(buf, p[hrec], hcnt, rec_end[hrec],
                                                           bad, hrec)
        p[hrec] = hpos
        f.hrec, f.hcnt = hrec, hcnt
    bad |= p != rec_end
    if bad.any():
        where = int(np.flatnonzero(bad)[0])
        batch_of = int(np.searchsorted(np.cumsum(counts), where, side="right"))
        fail(batch_of, f"inconsistent record structure (record "
                       f"{where - int(counts[:batch_of].sum())} of the batch)")

    # offsets, timestamps
    offsets = np.repeat(bases, counts)
    offsets += off_delta
    chunk = batches[first:first + nb]
    log_append = np.fromiter((b.log_append for b in chunk), dtype=bool, count=nb)
    first_ts = np.fromiter((b.max_ts if b.log_append else b.first_ts for b in chunk),
                           dtype=np.int64, count=nb)
    ts = np.repeat(first_ts, counts)
    if log_append.any():
        ts_delta = ts_delta * np.repeat(~log_append, counts)
        f.ts_type = np.repeat(log_append.astype(np.int32), counts)
    else:
        f.ts_type = None                      # all CREATE_TIME
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
    out.ts_type = np.concatenate([
        np.zeros(len(f.offsets), dtype=np.int32) if f.ts_type is None else f.ts_type
        for f in parts])
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


def _decode_v2_segment(data, mv, batches, topic, partition, fetch_offset,
                       include_headers, max_decompressed_size):
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
            walk_view = mv      # the Python walk indexes the input in place: no copy
        else:
            ob = _work_buffer()
            ob.reserve(sum(max(4 * (b.end - b.pos), 1 << 12) for b in batches))
            S = np.empty(nb, dtype=np.int64)
            E = np.empty(nb, dtype=np.int64)
        # Uncompressed input is decoded in one piece: chunking only pays when it lets
        # each chunk be decoded right after its decompression, still in cache.
        for c0, c1 in (_chunk_bounds(batches) if compressed else [(0, nb)]):
            if compressed:
                for i in range(c0, c1):
                    b = batches[i]
                    S[i] = ob.size
                    region = mv[b.pos + V2_HEADER_SIZE:b.end]
                    try:
                        _comp.decompress_into(b.codec, region, ob,
                                              max_size=max_decompressed_size)
                    except DecompressedSizeExceeded as exc:
                        raise DecompressedSizeExceeded(
                            f"topic {topic!r} partition {partition} offset {b.base}: "
                            f"{exc}") from None
                    except KafkaProtocolError as exc:
                        fail_batch(i, str(exc))
                    E[i] = ob.size
                ob.pad()
                buf = ob.array
                if len(buf) >= _MAX_BUFFER:
                    raise KafkaProtocolError("record data larger than 2 GiB in one fetch")
                walk_view = memoryview(buf)
            parts.append(_decode_chunk(buf, walk_view, batches, c0, S[c0:c1], E[c0:c1],
                                       counts[c0:c1], bases[c0:c1], fail_batch))
        pabuf = pa.py_buffer(ob.array if compressed else mv)
        f = _merge_fields(parts)
        parts = None
        offsets, ts, ts_type = f.offsets, f.ts, f.ts_type
        key_start, key_len, value_start, value_len = f.key_start, f.key_len, f.value_start, f.value_len
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
            "offset": _int_array(offsets, pa.int64()),
            "timestamp": _int_array(ts, TIMESTAMP_TYPE),
            "timestampType": _int_array(ts_type, pa.int32()),
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
            slot = int(first[lane])
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
                    hks[slot + j], hkl[slot + j], hvs[slot + j], hvl[slot + j] = ks, kl, vs, vl
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


def _control_type(mv, b: "_Batch", topic, partition, max_size):
    """Type of the first control record of a control batch (0 abort, 1 commit), or None."""
    if b.count <= 0:
        return None
    region = mv[b.pos + V2_HEADER_SIZE:b.end]
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


# --- legacy (magic 0/1) decode -------------------------------------------------------------

class _LegacyRows:
    __slots__ = ("keys", "values", "offsets", "ts", "ts_types")

    def __init__(self):
        self.keys = []
        self.values = []
        self.offsets = []
        self.ts = []
        self.ts_types = []

    def add(self, key, value, offset, timestamp, timestamp_type):
        self.keys.append(key)
        self.values.append(value)
        self.offsets.append(offset)
        self.ts.append(timestamp)
        self.ts_types.append(timestamp_type)

    def columns(self, include_headers):
        n = len(self.offsets)
        cols = {
            "key": pa.array(self.keys, pa.binary()),
            "value": pa.array(self.values, pa.binary()),
            "offset": pa.array(self.offsets, pa.int64()),
            "timestamp": _int_array(np.array(self.ts, dtype=np.int64) * 1000, TIMESTAMP_TYPE),
            "timestampType": pa.array(self.ts_types, pa.int32()),
        }
        if include_headers:
            cols["headers"] = pa.nulls(n, HEADERS_TYPE)
        return cols


def _legacy_message(buf, pos, end):
    """Parse one legacy message in ``buf[pos:end]`` (``end`` = its exact end).

    Returns ``(offset, crc, magic, attributes, timestamp, key, value)``; raises
    ``ValueError`` when the structure is inconsistent.
    """
    if end - pos < LOG_OVERHEAD + _LEGACY_MIN_LENGTH[0]:
        raise ValueError("message too short")
    magic = buf[pos + 16]
    if magic == 0:
        offset, _size, crc, magic, attrs = _LEGACY_V0.unpack_from(buf, pos)
        ts = NO_TIMESTAMP
        p = pos + _LEGACY_V0.size
    elif magic == 1:
        if end - pos < LOG_OVERHEAD + _LEGACY_MIN_LENGTH[1]:
            raise ValueError("message too short")
        offset, _size, crc, magic, attrs, ts = _LEGACY_V1.unpack_from(buf, pos)
        p = pos + _LEGACY_V1.size
    else:
        raise ValueError(f"unexpected magic {magic} in a legacy message set")
    (klen,) = _INT32.unpack_from(buf, p)
    p += 4
    key = None
    if klen >= 0:
        if p + klen + 4 > end:
            raise ValueError("key length exceeds the message")
        key = bytes(buf[p:p + klen])
        p += klen
    elif klen != -1:
        raise ValueError(f"invalid key length {klen}")
    if p + 4 > end:
        raise ValueError("truncated value length")
    (vlen,) = _INT32.unpack_from(buf, p)
    p += 4
    value = None
    if vlen >= 0:
        if p + vlen > end:
            raise ValueError("value length exceeds the message")
        value = bytes(buf[p:p + vlen])
        p += vlen
    elif vlen != -1:
        raise ValueError(f"invalid value length {vlen}")
    if p != end:
        raise ValueError("message size does not match its fields")
    return offset, crc, magic, attrs, ts, key, value


def _decode_legacy(mv, pos, end, rows: _LegacyRows, topic, partition, fetch_offset, max_size):
    """Decode one legacy (v0/v1) top-level message; returns its next offset."""
    (offset0,) = struct.unpack_from(">q", mv, pos)
    try:
        offset, crc, magic, attrs, ts, key, value = _legacy_message(mv, pos, end)
    except ValueError as exc:
        raise _corrupt(topic, partition, offset0, str(exc)) from None
    if zlib.crc32(mv[pos + 16:end]) != crc:
        raise _corrupt(topic, partition, offset, "CRC32 mismatch in legacy message")
    codec = attrs & ATTR_CODEC_MASK
    log_append = magic == 1 and bool(attrs & ATTR_TIMESTAMP_TYPE)
    ts_type = NO_TIMESTAMP_TYPE if magic == 0 else (LOG_APPEND_TIME if log_append else CREATE_TIME)
    if codec == 0:
        if offset >= fetch_offset:
            rows.add(key, value, offset, ts, ts_type)
        return offset + 1
    if value is None:
        raise _corrupt(topic, partition, offset, "compressed legacy message without a value")
    try:
        inner = _comp.decompress(codec, value, max_size, legacy_lz4=(magic == 0))
    except DecompressedSizeExceeded as exc:
        raise DecompressedSizeExceeded(
            f"topic {topic!r} partition {partition} offset {offset}: {exc}") from None
    except KafkaProtocolError as exc:
        raise _corrupt(topic, partition, offset, str(exc)) from None
    msgs = []
    p = 0
    n = len(inner)
    try:
        while p < n:
            if n - p < LOG_OVERHEAD:
                raise ValueError("truncated inner message")
            _o, size = _OFFSET_LENGTH.unpack_from(inner, p)
            if size < _LEGACY_MIN_LENGTH[0] or p + LOG_OVERHEAD + size > n:
                raise ValueError(f"invalid inner message size {size}")
            m = _legacy_message(inner, p, p + LOG_OVERHEAD + size)
            if zlib.crc32(inner[p + 16:p + LOG_OVERHEAD + size]) != m[1]:
                raise ValueError("CRC32 mismatch in an inner message")
            if m[3] & ATTR_CODEC_MASK:
                raise ValueError("nested compression in an inner message")
            msgs.append(m)
            p += LOG_OVERHEAD + size
    except ValueError as exc:
        raise _corrupt(topic, partition, offset, str(exc)) from None
    if not msgs:
        return offset + 1
    # magic 1: inner offsets are relative, the wrapper carries the last one's
    # absolute offset; magic 0: inner offsets are absolute.
    delta = offset - msgs[-1][0] if magic >= 1 else 0
    for ioff, _crc, imagic, _iattrs, its, ikey, ivalue in msgs:
        absolute = ioff + delta
        if absolute < fetch_offset:
            continue
        if magic == 0 or imagic == 0:
            t, tt = NO_TIMESTAMP, NO_TIMESTAMP_TYPE
        elif log_append:
            t, tt = ts, LOG_APPEND_TIME
        else:
            t, tt = its, CREATE_TIME
        rows.add(ikey, ivalue, absolute, t, tt)
    return offset + 1


# --- top level decode ----------------------------------------------------------------------------

def decode_records(data, *, topic, partition, fetch_offset, include_headers=True,
                   read_committed=False, aborted_transactions=(),
                   max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE) -> DecodeResult:
    """Decode one partition's ``records`` field of a Fetch response into Arrow.

    ``aborted_transactions`` is the Fetch response's list of
    ``(producer_id, first_offset)``; with ``read_committed`` the records of
    aborted transactions are dropped (the Java consumer's algorithm).
    ``max_decompressed_size`` caps the decompressed size of each batch.
    Raises :class:`CorruptRecordError` (naming topic, partition and offset)
    for bad CRCs, absurd lengths and inconsistent record structures.
    """
    if data is None:
        data = b""
    mv = memoryview(data)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    n = len(mv)
    if not isinstance(data, (bytes, bytearray)):
        data = None

    aborted_heap = []
    aborted_pids = set()
    if read_committed and aborted_transactions:
        aborted_heap = [(int(first), int(pid)) for pid, first in aborted_transactions]
        heapq.heapify(aborted_heap)

    segments = []          # ("v2", [_Batch]) | ("legacy", _LegacyRows)
    current = None         # list being filled for the current segment
    current_kind = None
    next_offset = fetch_offset
    truncated = False
    pos = 0
    unpack_v2 = _V2_HEADER.unpack_from
    unpack_ol = _OFFSET_LENGTH.unpack_from

    while pos < n:
        if n - pos < LOG_OVERHEAD:
            truncated = True
            break
        base, length = unpack_ol(mv, pos)
        if length < _LEGACY_MIN_LENGTH[0]:
            raise _corrupt(topic, partition, base, f"invalid batch length {length}")
        if length > max_decompressed_size:
            # Not a batch that is merely cut off by the fetch size: no broker sends
            # one this large, and waiting for "the rest" would never end.
            raise _corrupt(topic, partition, base,
                           f"batch length {length} exceeds the {max_decompressed_size}-byte limit")
        magic = mv[pos + 16] if n - pos > 16 else None
        if magic is not None:
            if magic > 2:
                raise _corrupt(topic, partition, base, f"unknown record batch magic {magic}")
            minimum = V2_MIN_BATCH_LENGTH if magic == 2 else _LEGACY_MIN_LENGTH[magic]
            if length < minimum:
                raise _corrupt(topic, partition, base,
                               f"batch length {length} below the minimum {minimum} for magic {magic}")
        end = pos + LOG_OVERHEAD + length
        if end > n:
            truncated = True
            break

        if magic == 2:
            (base, _blen, _ple, _magic, crc, attrs, last_delta, first_ts, max_ts,
             pid, _epoch, _seq, count) = unpack_v2(mv, pos)
            if _crc32c(mv[pos + _V2_ATTRIBUTES_OFFSET:end]) != crc:
                raise _corrupt(topic, partition, base, "CRC32C mismatch in record batch")
            if count < 0:
                raise _corrupt(topic, partition, base, f"negative record count {count}")
            batch_next = base + last_delta + 1
            control = attrs & ATTR_CONTROL
            skip = False
            if read_committed and pid >= 0:
                # KafkaConsumer's CompletedFetch: collect aborted transactions
                # that started at or before this batch's last offset.
                last_offset = base + last_delta
                while aborted_heap and aborted_heap[0][0] <= last_offset:
                    aborted_pids.add(heapq.heappop(aborted_heap)[1])
                if control:
                    b = _Batch(pos, end, base, count, attrs & ATTR_CODEC_MASK, False, 0, 0)
                    if _control_type(mv, b, topic, partition, max_decompressed_size) == 0:
                        aborted_pids.discard(pid)
                elif attrs & ATTR_TRANSACTIONAL and pid in aborted_pids:
                    skip = True
            if not control and not skip and count > 0 and batch_next > fetch_offset:
                if current_kind != "v2":
                    current = []
                    current_kind = "v2"
                    segments.append(("v2", current))
                current.append(_Batch(pos, end, base, count, attrs & ATTR_CODEC_MASK,
                                      bool(attrs & ATTR_TIMESTAMP_TYPE), first_ts, max_ts))
            if batch_next > next_offset:
                next_offset = batch_next
        else:
            if current_kind != "legacy":
                current = _LegacyRows()
                current_kind = "legacy"
                segments.append(("legacy", current))
            batch_next = _decode_legacy(mv, pos, end, current, topic, partition,
                                        fetch_offset, max_decompressed_size)
            if batch_next > next_offset:
                next_offset = batch_next
        pos = end

    parts = []
    for kind, payload in segments:
        if kind == "v2":
            parts.append(_decode_v2_segment(data, mv, payload, topic, partition, fetch_offset,
                                            include_headers, max_decompressed_size))
        elif payload.offsets:
            parts.append(payload.columns(include_headers))
    schema = record_schema(include_headers)
    if not parts:
        cols = _empty_columns(include_headers)
    elif len(parts) == 1:
        cols = parts[0]
    else:
        cols = {name: pa.concat_arrays([p[name] for p in parts]) for name in schema.names}
    batch = pa.RecordBatch.from_arrays([cols[name] for name in schema.names], schema=schema)
    return DecodeResult(batch=batch, next_offset=int(next_offset), truncated=truncated,
                        record_count=batch.num_rows, bytes_consumed=pos)


# --- encode ---------------------------------------------------------------------------------------

def _as_binary_array(values, what):
    if values is None:
        return None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(list(values))
        if pa.types.is_null(values.type):
            values = values.cast(pa.binary())
    t = values.type
    if pa.types.is_binary(t):
        return values
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t) \
            or pa.types.is_binary_view(t) or pa.types.is_string_view(t) \
            or pa.types.is_fixed_size_binary(t) or pa.types.is_null(t):
        return values.cast(pa.binary())
    raise KafkaProtocolError(f"{what} must be a binary or string array, got {t}")


def _lengths(arr):
    """int64 lengths of a binary array, -1 for nulls."""
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1 + arr.offset)
    offs = offs[arr.offset:]
    ln = (offs[1:] - offs[:-1]).astype(np.int64)
    if arr.null_count:
        ln[np.asarray(arr.is_null())] = -1
    return ln


def _zz_encode(x):
    x = np.asarray(x, dtype=np.int64)
    return ((x << 1) ^ (x >> 63)).view(np.uint64)


def _varint_sizes(u):
    sizes = np.ones(len(u), dtype=np.int64)
    if len(u) == 0:
        return sizes
    top = int(u.max())
    shift = 7
    while shift < 64 and top >> shift:
        sizes += u >= np.uint64(1 << shift)
        shift += 7
    return sizes


def _write_varints(out, pos, u, sizes):
    """Write unsigned varints ``u`` (uint64) at ``pos`` in ``out`` (uint8)."""
    if len(u) == 0:
        return
    more = sizes > 1
    if not more.any():
        out[pos] = u.astype(np.uint8)
        return
    out[pos] = (u & np.uint64(0x7F)).astype(np.uint8) | (more.astype(np.uint8) << 7)
    lanes = np.flatnonzero(more)
    j = 1
    while lanes.size:
        uu = u[lanes] >> np.uint64(7 * j)
        cont = sizes[lanes] > j + 1
        out[pos[lanes] + j] = (uu & np.uint64(0x7F)).astype(np.uint8) | (cont.astype(np.uint8) << 7)
        lanes = lanes[cont]
        j += 1


def _assemble(pieces_meta, meta_buf, sources, order):
    """Concatenate byte pieces in ``order`` with one Arrow take.

    ``pieces_meta`` are offsets (int64, len m+1) of m pieces in ``meta_buf``;
    ``sources`` are further binary arrays appended after the meta pieces.
    """
    meta = pa.Array.from_buffers(pa.binary(), len(pieces_meta) - 1,
                                 [None, pa.py_buffer(pieces_meta.astype(np.int32)),
                                  pa.py_buffer(meta_buf)])
    combined = pa.concat_arrays([meta] + [s for s in sources])
    out = pc.take(combined, pa.array(order), boundscheck=False)
    offs = np.frombuffer(out.buffers()[1], dtype=np.int32, count=len(out) + 1 + out.offset)
    lo = int(offs[out.offset])
    hi = int(offs[out.offset + len(out)])
    return memoryview(out.buffers()[2])[lo:hi], out


def _encode_headers(headers, n):
    """(per-record header count int64, per-record header bytes as a binary array)."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if not isinstance(headers, pa.Array):
        headers = pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers],
            type=HEADERS_TYPE)
    if len(headers) != n:
        raise KafkaProtocolError(f"headers has {len(headers)} rows, values has {n}")
    if not (pa.types.is_list(headers.type) or pa.types.is_large_list(headers.type)):
        raise KafkaProtocolError(f"headers must be a list<struct<key, value>> array, got {headers.type}")
    if headers.null_count:
        headers = headers.fill_null(pa.scalar([], type=headers.type))
    offs = np.asarray(headers.offsets, dtype=np.int64)
    counts = offs[1:] - offs[:-1]
    flat = headers.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
    H = len(flat)
    if H == 0:
        return counts, None
    if flat.null_count:
        raise KafkaProtocolError("a header entry is null")
    hkeys = _as_binary_array(flat.field("key"), "header key")
    hvals = _as_binary_array(flat.field("value"), "header value")
    if hkeys.null_count:
        raise KafkaProtocolError("header keys must not be null")
    kl = _lengths(hkeys)
    vl = _lengths(hvals)
    ku = _zz_encode(kl)
    vu = _zz_encode(vl)
    ks = _varint_sizes(ku)
    vs = _varint_sizes(vu)
    # meta pieces per header: [key length varint], [value length varint]
    piece = np.empty(2 * H, dtype=np.int64)
    piece[0::2] = ks
    piece[1::2] = vs
    moffs = np.zeros(2 * H + 1, dtype=np.int64)
    np.cumsum(piece, out=moffs[1:])
    meta = np.zeros(int(moffs[-1]), dtype=np.uint8)
    _write_varints(meta, moffs[0:-1:2], ku, ks)
    _write_varints(meta, moffs[1:-1:2], vu, vs)
    idx = np.arange(H, dtype=np.int64)
    order = np.empty(4 * H, dtype=np.int64)
    order[0::4] = 2 * idx
    order[1::4] = 2 * H + idx
    order[2::4] = 2 * idx + 1
    order[3::4] = 3 * H + idx
    region, out = _assemble(moffs, meta, [hkeys, hvals], order)
    # per-header byte sizes -> per-record byte sizes
    hsize = ks + np.maximum(kl, 0) + vs + np.maximum(vl, 0)
    hcum = np.zeros(H + 1, dtype=np.int64)
    np.cumsum(hsize, out=hcum[1:])
    rec_offs = hcum[offs - offs[0]]
    blob = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(rec_offs.astype(np.int32)),
                                                  pa.py_buffer(region)])
    return counts, blob


def encode_record_batch(*, keys, values, headers=None, timestamps_ms=None, base_offset=0,
                        compression=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                        is_transactional=False, partition_leader_epoch=-1, now_ms=None) -> bytes:
    """Build one v2 record batch (magic 2) from Arrow arrays.

    ``keys``/``values``: binary or string arrays (nullable; ``keys=None`` means
    all keys null).  ``headers``: ``list<struct<key: string, value: binary>>``
    array (or a list of ``[(key, value), ...]``/None per record) or None.
    ``timestamps_ms``: int64 array (nulls -> now) or None (all now).
    ``compression``: codec id or name.  Offsets deltas are 0..n-1.
    """
    values = _as_binary_array(values, "values")
    if values is None:
        raise KafkaProtocolError("values is required")
    n = len(values)
    if n == 0:
        raise KafkaProtocolError("cannot encode an empty record batch")
    keys = _as_binary_array(keys, "keys")
    if keys is None:
        keys = pa.nulls(n, pa.binary())
    if len(keys) != n:
        raise KafkaProtocolError(f"keys has {len(keys)} rows, values has {n}")
    codec = _comp.codec_id(compression)
    if now_ms is None:
        now_ms = int(time.time() * 1000)

    if timestamps_ms is None:
        ts = np.full(n, now_ms, dtype=np.int64)
    else:
        if isinstance(timestamps_ms, (pa.Array, pa.ChunkedArray)):
            tarr = timestamps_ms
            if pa.types.is_timestamp(tarr.type):
                tarr = pc.cast(tarr, pa.timestamp("ms", tz=tarr.type.tz)).cast(pa.int64())
            ts = np.asarray(tarr.cast(pa.int64()).fill_null(now_ms), dtype=np.int64)
        else:
            ts = np.asarray(timestamps_ms, dtype=np.int64)
        if len(ts) != n:
            raise KafkaProtocolError(f"timestamps_ms has {len(ts)} rows, values has {n}")
    first_ts = int(ts[0])
    max_ts = int(ts.max())

    kl = _lengths(keys)
    vl = _lengths(values)
    if headers is not None:
        hcount, hblob = _encode_headers(headers, n)
    else:
        hcount, hblob = np.zeros(n, dtype=np.int64), None
    hbytes = np.zeros(n, dtype=np.int64)
    if hblob is not None:
        ho = np.frombuffer(hblob.buffers()[1], dtype=np.int32, count=n + 1)
        hbytes = (ho[1:] - ho[:-1]).astype(np.int64)

    # One (6, n) matrix of zigzag varints: length, tsDelta, offsetDelta, keyLen,
    # valueLen, headerCount -- sized and written in one vectorised pass each.
    fields = np.empty((6, n), dtype=np.int64)
    np.subtract(ts, first_ts, out=fields[1])
    fields[2] = np.arange(n, dtype=np.int64)
    fields[3] = kl
    fields[4] = vl
    fields[5] = hcount
    u = _zz_encode(fields)
    sizes = np.empty((6, n), dtype=np.int64)
    sizes[1:] = _varint_sizes(u[1:].ravel()).reshape(5, n)
    s_len, s_ts, s_od, s_kl, s_vl, s_hc = sizes
    body = 1 + s_ts + s_od + s_kl + np.maximum(kl, 0) + s_vl + np.maximum(vl, 0) + s_hc + hbytes
    u[0] = _zz_encode(body)
    s_len[:] = _varint_sizes(u[0])

    # meta pieces per record: P1 = len, attributes, tsDelta, offsetDelta, keyLen;
    # P2 = valueLen; P3 = headerCount
    p1 = s_len + 1 + s_ts + s_od + s_kl
    per = p1 + s_vl + s_hc
    rec_meta = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per, out=rec_meta[1:])
    m0 = rec_meta[:-1]
    meta = np.zeros(int(rec_meta[-1]), dtype=np.uint8)
    at = np.empty((6, n), dtype=np.int64)
    at[0] = m0
    np.add(m0, s_len + 1, out=at[1])    # the attributes byte in between stays 0
    np.add(at[1], s_ts, out=at[2])
    np.add(at[2], s_od, out=at[3])
    np.add(at[3], s_kl, out=at[4])
    np.add(at[4], s_vl, out=at[5])
    _write_varints(meta, at.ravel(), u.ravel(), sizes.ravel())
    poffs = np.empty(3 * n + 1, dtype=np.int64)
    poffs[0:-1:3] = m0
    poffs[1::3] = m0 + p1
    poffs[2::3] = m0 + p1 + s_vl
    poffs[-1] = rec_meta[-1]

    idx = np.arange(n, dtype=np.int64)
    k = 6 if hblob is not None else 5
    order = np.empty(k * n, dtype=np.int64)
    order[0::k] = 3 * idx                 # P1
    order[1::k] = 3 * n + idx             # key
    order[2::k] = 3 * idx + 1             # P2
    order[3::k] = 4 * n + idx             # value
    order[4::k] = 3 * idx + 2             # P3
    sources = [keys, values]
    if hblob is not None:
        order[5::k] = 5 * n + idx         # header bytes
        sources.append(hblob)
    region, _keepalive = _assemble(poffs, meta, sources, order)

    if codec != 0:
        region = _comp.compress(codec, region)
    attrs = codec | (ATTR_TRANSACTIONAL if is_transactional else 0)
    total = V2_HEADER_SIZE + len(region)
    out = bytearray(total)
    out[V2_HEADER_SIZE:] = region
    _V2_HEADER.pack_into(out, 0, base_offset, total - LOG_OVERHEAD, partition_leader_epoch, 2, 0,
                         attrs, n - 1, first_ts, max_ts, producer_id, producer_epoch,
                         base_sequence, n)
    crc = _crc32c(memoryview(out)[_V2_ATTRIBUTES_OFFSET:])
    struct.pack_into(">I", out, _V2_CRC_OFFSET, crc)
    return bytes(out)
