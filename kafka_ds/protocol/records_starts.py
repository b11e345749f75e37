"""v2 record start discovery: where each record of a run of v2 batches begins, found
column-wise (zero-byte scans and chained length checks, a Python walk only where those
cannot decide), plus the vectorised zigzag varint reader and the per-thread scratch
buffers the decode shares (the steps: kafka_ds.protocol.records)."""

from __future__ import annotations

import threading

import numpy as np

from .output_buffer import OutputBuffer
from .records_layout import _MIN_RECORD_BODY

_ZERO_SCAN_MAX_AVG_RECORD = 640  # bytes; above this the Python walk is cheaper
_BIG = 1 << 62

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
        u = (b0[slow] & 0x7F).astype(np.uint64) | (
            (b1[slow] & 0x7F).astype(np.uint64) << np.uint64(7)
        )
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
    out: list = []
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
    for a, b in zip((E[:-1] - lo).tolist(), (S[1:] - lo).tolist(), strict=True):
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
    ok = (
        ((ib - ia) == counts)
        & (c[head] == S)
        & (link_bad[last] == link_bad[head])  # ia may be len(c): clamped (fuzzing)
        & (nx[last] == E)
    )
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
        alive = mark[nx - lo]  # its successor exists
        pointed = np.zeros(span, dtype=bool)
        pointed[nx[alive] - lo] = True
        alive &= pointed[c - lo] | head_mark[c - lo]  # something points to it
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
    proven = {}  # region -> (candidates, first index)
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
            piece = cc[i0 : i0 + int(counts[r])]
            if len(piece) == counts[r]:  # (always, by construction)
                pieces.append(piece)
                continue
        s = int(S[r])
        e = int(E[r])
        b, base = walk_bytes(s, e)
        starts, end = _walk_region(b, s - base, e - base)
        if end != e - base or len(starts) != counts[r]:
            fail(
                r,
                f"record lengths do not add up to the batch ({len(starts)} records "
                f"parsed, {int(counts[r])} declared)",
            )
        arr = np.array(starts, dtype=np.int64)
        if base:
            arr += base
        pieces.append(arr)
    if not pieces:
        return np.empty(0, dtype=np.int64), None, None
    return np.concatenate(pieces), None, None


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
