"""RowBytes (formats/wire_columns.py), the column-wise row builder of the typed write fast
paths, against the same rows built one by one in Python: every kind of part, in any
order, with rows absent and parts used by some rows only, and the shortcuts it takes when
every row uses every byte of a run (a header, non-null fixed fields, varints as long in
every row) or some rows are absent."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_ds.formats.wire_columns import RowBytes
from kafka_ds.protocol.primitives import uvarint_bytes

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mask(draw, n, present, kind):
    """A ``used`` mask, a subset of ``present``: every present row, or some of them."""
    if kind == "all":
        return present.copy()
    return present & np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)


@st.composite
def cases(draw):
    n = draw(st.integers(1, 12))
    present = np.array(
        draw(st.one_of(st.just([True] * n), st.lists(st.booleans(), min_size=n, max_size=n))), bool
    )
    steps = []
    for _ in range(draw(st.integers(0, 7))):
        kind = draw(st.sampled_from(["constant", "byte", "fixed", "varint", "value"]))
        used = _mask(draw, n, present, draw(st.sampled_from(["all", "some"])))
        if kind == "constant":
            steps.append((kind, draw(st.binary(max_size=5)), None if draw(st.booleans()) else used))
        elif kind == "byte":
            steps.append(
                (
                    kind,
                    np.array(draw(st.lists(st.integers(0, 255), min_size=n, max_size=n)), np.uint8),
                    used,
                )
            )
        elif kind == "fixed":
            dtype = draw(st.sampled_from([np.int32, np.int64, np.float64]))
            steps.append(
                (
                    kind,
                    np.array(
                        draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n))
                    ).astype(dtype),
                    used,
                )
            )
        elif kind == "varint":
            # narrow ranges give varints as long in every row, wide ones mixed widths
            low = draw(st.sampled_from([0, 1 << 7, 1 << 14, 1 << 35, 1 << 63]))
            span = draw(st.sampled_from([0, 100, 1 << 20, (1 << 64) - 1 - low]))
            values = draw(
                st.lists(st.integers(low, min(low + span, (1 << 64) - 1)), min_size=n, max_size=n)
            )
            steps.append((kind, np.array(values, np.uint64), used))
        else:
            steps.append(
                (
                    kind,
                    pa.array(
                        draw(st.lists(st.none() | st.binary(max_size=6), min_size=n, max_size=n)),
                        pa.binary(),
                    ),
                    None,
                )
            )
    return n, present, steps


def _one_by_one(n, present, steps):
    rows = []
    for i in range(n):
        if not present[i]:
            rows.append(None)
            continue
        out = bytearray()
        for kind, data, used in steps:
            if kind == "value":
                out += data[i].as_py() or b""
            elif used is not None and not used[i]:
                continue
            elif kind == "constant":
                out += data
            elif kind == "byte":
                out.append(int(data[i]))
            elif kind == "fixed":
                out += data[i : i + 1].tobytes()
            else:
                out += uvarint_bytes(int(data[i]))
        rows.append(bytes(out))
    return rows


@SETTINGS
@given(cases())
def test_rows_built_column_wise_equal_rows_built_one_by_one(case):
    n, present, steps = case
    rows = RowBytes(present)
    for kind, data, used in steps:
        if kind == "constant":
            rows.constant(data, used)
        elif kind == "value":
            rows.value(data)
        else:
            getattr(rows, kind)(data, used)
    built = rows.finish()
    assert built.to_pylist() == _one_by_one(n, present, steps)
    assert built.null_count == int((~present).sum())


def test_a_run_every_row_uses_whole_is_its_matrix_and_a_mixed_run_is_compressed():
    present = np.array([True, True, True])
    whole = RowBytes(present)
    whole.constant(b"\x00\x01")
    whole.varint(np.array([300, 301, 16383], np.uint64), present)  # 2 bytes in every row
    whole.fixed(np.array([1, 2, 3], np.int32), present)
    assert all(mask is None for _, mask, _ in whole.blocks)  # no row is cut short
    assert whole.finish().to_pylist() == [
        b"\x00\x01\xac\x02\x01\x00\x00\x00",
        b"\x00\x01\xad\x02\x02\x00\x00\x00",
        b"\x00\x01\xff\x7f\x03\x00\x00\x00",
    ]
    mixed = RowBytes(present)
    mixed.varint(np.array([1, 300, 1 << 40], np.uint64), present)  # 1, 2 and 6 bytes
    assert mixed.blocks[0][1] is not None
    assert mixed.finish().to_pylist() == [
        uvarint_bytes(1),
        uvarint_bytes(300),
        uvarint_bytes(1 << 40),
    ]
