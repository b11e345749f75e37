"""The fast path: flat Avro records decoded field by field across all rows at once.

A :class:`FlatPlan` is built once per (writer schema, reader schema) pair when both are
flat (records of primitives, ``[null, primitive]`` unions, date/timestamp logical types;
or a single such top-level type). Decoding keeps one current position per row and walks
the *writer's* fields in order: every read is a numpy gather over all rows (zigzag
varints byte by byte over the rows still continuing, floats as 4/8-byte gathers, strings
as a length then a slice). Writer-only fields are skipped, reader-only fields take their
default, matched fields are promoted to the reader's type (Avro's resolution rules).

A row whose read passes its payload end is "truncated"; one that ends early has
"trailing bytes"; the first problem of a row is its reason. Bad rows never stop the
batch: their positions are frozen and their later reads are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...protocol.records_arrays import is_utf8, peek_uvarints
from ..framing import slice_positions
from .types import AvroSchemaError, avro_to_spark, logical, spark_to_arrow, union_parts

_FAST_BASES = frozenset(("boolean", "int", "long", "float", "double", "string", "bytes"))
_FAST_LOGICAL = frozenset(
    (
        None,
        "date",
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
        "uuid",
    )
)
# writer base -> reader bases it may be read as (Avro's promotions)
_PROMOTES = {
    "int": ("int", "long", "float", "double"),
    "long": ("long", "float", "double"),
    "float": ("float", "double"),
    "double": ("double",),
    "boolean": ("boolean",),
    "string": ("string", "bytes"),
    "bytes": ("bytes", "string"),
}
_NUMPY = {"int": np.int32, "long": np.int64, "float": np.float32, "double": np.float64}
_WIDTH = {"float": 4, "double": 8}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


class ResolutionError(ValueError):
    """The writer schema cannot be resolved to the reader schema (for every record)."""


@dataclass(frozen=True)
class FlatType:
    base: str  # one of _FAST_BASES
    logical: str | None  # date / timestamp-* / local-timestamp-* / uuid / None
    null_index: int | None  # union index of the null branch, None when not a union


def flat_type(node: dict) -> FlatType | None:
    """The FlatType of a node, or None when the fast path cannot decode it."""
    null_index = None
    if node["type"] == "union":
        branches = node["branches"]
        non_null, has_null = union_parts(node)
        if len(branches) != 2 or not has_null:
            return None
        null_index = 0 if branches[0]["type"] == "null" else 1
        node = non_null[0]
    if node["type"] not in _FAST_BASES:
        return None
    lt = logical(node)
    if lt not in _FAST_LOGICAL or (node.get("logicalType") and lt is None):
        return None  # unknown logical types keep fastavro's interpretation
    return FlatType(node["type"], lt if lt != "uuid" else None, null_index)


@dataclass
class _Step:
    """One writer field: how to read it and where it goes (``output`` None: skipped)."""

    writer: FlatType
    name: str
    output: int | None = None
    raw: bool = False  # bytes without Avro's length: the rest of the payload


@dataclass
class _Output:
    """One reader field: from a writer step, or a constant default."""

    name: str
    reader: FlatType
    arrow_type: pa.DataType
    step: int | None = None
    default: object = None


class FlatPlan:
    """How to decode one writer schema into one reader schema column-wise."""

    def __init__(self, steps, outputs, is_record, arrow_type):
        self.steps = steps
        self.outputs = outputs
        self.is_record = is_record
        self.arrow_type = arrow_type

    def raw_bytes(self) -> FlatPlan:
        """This plan of a top-level ``bytes`` writer, for payloads that are the bytes
        alone, without Avro's length (Confluent's framing, :mod:`.raw_bytes`)."""
        (step,) = self.steps
        if self.is_record or step.writer != FlatType("bytes", None, None):
            raise ValueError("only a top-level bytes writer is read raw")
        return FlatPlan([replace(step, raw=True)], self.outputs, False, self.arrow_type)

    def decode(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        """``(array, bad bool[n], reasons object[n])`` for the payloads ``data[starts:ends]``."""
        n = len(starts)
        state = _Rows(data, starts.astype(np.int64, copy=True), ends, n)
        decoded = [self._read_step(state, step) for step in self.steps]
        state.fail(
            ~state.bad & (state.pos < ends),
            lambda rows: [
                f"trailing bytes: the record ends {e - p} bytes before its payload"
                for p, e in zip(state.pos[rows].tolist(), ends[rows].tolist(), strict=True)
            ],
        )
        columns = [self._column(state, out, decoded) for out in self.outputs]
        if not self.is_record:
            column = columns[0]
            if state.bad.any():
                column = pc.if_else(pa.array(state.bad), pa.nulls(n, column.type), column)
            return column, state.bad, state.reasons
        mask = pa.array(state.bad) if state.bad.any() else None
        struct = pa.StructArray.from_arrays(columns, fields=list(self.arrow_type), mask=mask)
        return struct, state.bad, state.reasons

    # -- reading -----------------------------------------------------------------------

    def _read_step(self, state, step):
        ft = step.writer
        lanes = None
        if ft.null_index is not None:
            branch = state.read_long(None, f"{step.name}: union index")
            state.fail(
                ~state.bad & ((branch < 0) | (branch > 1)), f"{step.name}: union index out of range"
            )
            lanes = np.flatnonzero(~state.bad & (branch != ft.null_index))
        if step.raw:
            return lanes, state.read_rest()
        return lanes, state.read(ft.base, lanes, step.name)

    def _column(self, state, out, decoded):
        n = state.n
        if out.step is None:
            if out.default is None:
                return pa.nulls(n, out.arrow_type)
            return pa.repeat(pa.scalar(out.default, out.arrow_type), n)
        step = self.steps[out.step]
        lanes, values = decoded[out.step]
        writer = step.writer
        valid = np.zeros(n, bool)
        if lanes is None:
            valid[:] = True
        else:
            valid[lanes] = True
        valid &= ~state.bad
        if writer.null_index is not None and out.reader.null_index is None:
            # writer union [null, T] read as a plain T: a null value cannot be resolved
            state.fail(~state.bad & ~valid, f"{step.name}: null where the reader has no null")
        if writer.base in ("string", "bytes"):
            return self._binary_column(state, out, lanes, values, valid)
        full = np.zeros(n, dtype=values.dtype)
        if lanes is None:
            full = values
        else:
            full[lanes] = values
        return _fixed_column(out, writer, full, valid)

    def _binary_column(self, state, out, lanes, values, valid):
        n = state.n
        begins = np.zeros(n, np.int64)
        lengths = np.zeros(n, np.int64)
        where = slice(None) if lanes is None else lanes
        begins[where], lengths[where] = values
        lengths[~valid] = 0
        is_string = out.reader.base == "string"
        array = _binary_array(
            state.data, begins, lengths, valid, pa.string() if is_string else pa.binary()
        )
        if is_string:
            try:
                array.validate(full=True)
            except pa.ArrowInvalid:
                bad = [
                    r
                    for r in np.flatnonzero(valid).tolist()
                    if not is_utf8(state.data[begins[r] : begins[r] + lengths[r]])
                ]
                state.fail(np.isin(np.arange(n), bad), f"{out.name}: invalid UTF-8 in a string")
                valid &= ~state.bad
                lengths[~valid] = 0
                array = _binary_array(state.data, begins, lengths, valid, pa.string())
        return array


def _validity(valid):
    if valid.all():
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), int((~valid).sum())


def _binary_array(data, begins, lengths, valid, arrow_type):
    offsets = np.zeros(len(begins) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= (1 << 31):
        raise ValueError("decoded strings of one batch exceed 2 GiB")
    body = data[slice_positions(begins, lengths)]
    validity, nulls = _validity(valid)
    return pa.Array.from_buffers(
        arrow_type,
        len(begins),
        [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(body)],
        null_count=nulls,
    )


def _fixed_column(out, writer, values, valid):
    reader = out.reader
    if reader.base == "boolean":
        data = pa.py_buffer(np.packbits(values.astype(bool), bitorder="little"))
    else:
        values = values.astype(_NUMPY[reader.base], copy=False)
        if reader.logical in ("timestamp-millis", "local-timestamp-millis"):
            values = values * 1000  # Spark timestamps are microseconds
        data = pa.py_buffer(np.ascontiguousarray(values))
    validity, nulls = _validity(valid)
    return pa.Array.from_buffers(out.arrow_type, len(values), [validity, data], null_count=nulls)


class _Rows:
    """Per-row cursor state of one decode: positions, ends, first failure reasons."""

    def __init__(self, data, pos, ends, n):
        self.data = data if data.size else np.zeros(1, np.uint8)  # take() needs a byte
        self.pos = pos
        self.ends = ends
        self.n = n
        self.bad = np.zeros(n, bool)
        self.reasons = np.empty(n, dtype=object)

    def fail(self, mask, reason):
        rows = np.flatnonzero(mask & ~self.bad)
        if rows.size:
            self.reasons[rows] = reason(rows) if callable(reason) else reason
            self.bad[rows] = True
            self.pos[rows] = self.ends[rows]  # frozen: later reads are clipped and ignored

    def _truncated(self, lanes, name):
        pos = self.pos if lanes is None else self.pos[lanes]
        ends = self.ends if lanes is None else self.ends[lanes]
        over = pos > ends
        if over.any():
            mask = np.zeros(self.n, bool)
            mask[np.flatnonzero(over) if lanes is None else lanes[over]] = True
            self.fail(mask, f"truncated: the record ends inside {name}")

    def _mask(self, lanes, lane_mask):
        mask = np.zeros(self.n, bool)
        mask[np.flatnonzero(lane_mask) if lanes is None else lanes[lane_mask]] = True
        return mask

    def read_long(self, lanes, name):
        """Zigzag varints at the lanes' positions (all rows when ``lanes`` is None)."""
        pos = self.pos if lanes is None else self.pos[lanes]
        u, size = peek_uvarints(self.data, pos)
        if not size.all():
            self.fail(self._mask(lanes, size == 0), f"{name}: varint longer than 10 bytes")
        values = (u >> np.uint64(1)).view(np.int64) ^ -(u & np.uint64(1)).view(np.int64)
        if lanes is None:
            self.pos += size
        else:
            self.pos[lanes] += size
        self._truncated(lanes, name)
        return values

    def read_rest(self):
        """Every row's remaining payload, as (begins, lengths) like a bytes value."""
        begins = self.pos.copy()
        self.pos = self.ends.astype(np.int64, copy=True)
        return begins, self.pos - begins

    def read(self, base, lanes, name):
        """Values of one primitive at the lanes' positions; strings/bytes as (begins, lengths)."""
        count = self.n if lanes is None else len(lanes)
        if base in ("int", "long"):
            values = self.read_long(lanes, name)
            if base == "int":
                self.fail(
                    self._mask(lanes, (values < _INT32_MIN) | (values > _INT32_MAX)),
                    f"{name}: int out of range",
                )
            return values
        if base in ("string", "bytes"):
            lengths = self.read_long(lanes, f"{name} length")
            self.fail(self._mask(lanes, lengths < 0), f"{name}: negative length")
            pos = self.pos if lanes is None else self.pos[lanes]
            ends = self.ends if lanes is None else self.ends[lanes]
            over = lengths > ends - pos
            self.fail(self._mask(lanes, over), f"truncated: the record ends inside {name}")
            lengths = np.where(over | (lengths < 0), 0, lengths)
            begins = self.pos.copy() if lanes is None else self.pos[lanes]
            if lanes is None:
                self.pos += lengths
            else:
                self.pos[lanes] += lengths
            return begins, lengths
        pos = self.pos if lanes is None else self.pos[lanes]
        if base == "boolean":
            values = self.data.take(pos, mode="clip")
            width = 1
        else:
            width = _WIDTH[base]
            gathered = self.data.take(pos[:, None] + np.arange(width), mode="clip")
            values = gathered.view(np.float32 if width == 4 else np.float64).reshape(count)
        if lanes is None:
            self.pos += width
        else:
            self.pos[lanes] += width
        self._truncated(lanes, name)  # before the value check: a clipped read is garbage
        if base == "boolean":
            self.fail(self._mask(lanes, values > 1), f"{name}: boolean byte is not 0 or 1")
        return values


# --- planning -------------------------------------------------------------------------


def _field_names(field: dict):
    return (field["name"], *field.get("aliases", ()))


def _default_value(field: dict, reader: FlatType):
    """The reader field's default as a Python value of its Arrow type."""
    value = field["default"]
    if value is None:
        return None
    if reader.null_index == 0:
        raise ResolutionError(
            f"field {field['name']}: a union's default must match its first branch, null"
        )
    if reader.base == "bytes":
        return value.encode("latin-1")
    if reader.logical in ("timestamp-millis", "local-timestamp-millis"):
        return int(value) * 1000
    return value


def build_plan(writer: dict, reader: dict) -> FlatPlan | None:
    """A FlatPlan for the pair, None when either is not flat; ResolutionError when the
    schemas cannot be resolved at all."""
    if reader["type"] != "record":
        if writer["type"] == "record":
            return None
        rt, wt = flat_type(reader), flat_type(writer)
        if rt is None or wt is None or not _compatible(wt, rt, "value"):
            return None
        arrow_type = spark_to_arrow(avro_to_spark(reader)[0])
        out = _Output("value", rt, arrow_type, step=0)
        return FlatPlan([_Step(wt, "value", 0)], [out], False, arrow_type)
    if writer["type"] != "record":
        return None
    if reader["name"].rpartition(".")[2] != writer["name"].rpartition(".")[2] and not any(
        a.rpartition(".")[2] == writer["name"].rpartition(".")[2] for a in reader.get("aliases", ())
    ):
        raise ResolutionError(
            f"writer record {writer['name']} is not the reader's {reader['name']}"
        )
    reader_flat = [flat_type(f["type"]) for f in reader["fields"]]
    writer_flat = [flat_type(f["type"]) for f in writer["fields"]]
    reader_types = [t for t in reader_flat if t is not None]
    writer_types = [t for t in writer_flat if t is not None]
    if len(reader_types) < len(reader_flat) or len(writer_types) < len(writer_flat):
        return None
    arrow_type = spark_to_arrow(avro_to_spark(reader)[0])
    steps = [_Step(wt, f["name"]) for f, wt in zip(writer["fields"], writer_types, strict=True)]
    by_name = {f["name"]: i for i, f in enumerate(writer["fields"])}
    outputs = []
    for index, (field, rt) in enumerate(zip(reader["fields"], reader_types, strict=True)):
        source = next((by_name[name] for name in _field_names(field) if name in by_name), None)
        out = _Output(field["name"], rt, arrow_type.field(index).type, step=source)
        if source is None:
            if "default" not in field:
                raise ResolutionError(
                    f"reader field {field['name']} is not in the writer schema and has no default"
                )
            out.default = _default_value(field, rt)
        elif not _compatible(steps[source].writer, rt, field["name"]):
            return None
        else:
            steps[source].output = index
        outputs.append(out)
    return FlatPlan(steps, outputs, True, arrow_type)


def _compatible(wt: FlatType, rt: FlatType, name: str) -> bool:
    """True when the fast path can read ``wt`` as ``rt``; ResolutionError when Avro cannot."""
    if rt.base not in _PROMOTES[wt.base]:
        raise ResolutionError(f"field {name}: writer {wt.base} cannot be read as {rt.base}")
    # Different logical types (millis vs micros, ...) are left to the general path.
    return wt.logical == rt.logical


__all__ = ["FlatPlan", "ResolutionError", "build_plan", "flat_type", "AvroSchemaError"]
