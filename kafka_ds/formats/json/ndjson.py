"""The batch path of JSON decode: one C++ parse per batch. The payloads become one
newline-delimited text (for framed records the 5-byte header of each is overwritten in
place with a newline and spaces, so no per-record copy) read by ``pyarrow.json.read_json``
with the reader's Arrow type as explicit schema."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from kafka_ds.formats.framing import HEADER_SIZE

_NEWLINES = (ord("\n"), ord("\r"))
_OPEN_BRACE = ord("{")
# one thread: Spark already runs a task per core; 16 MB blocks keep a batch one block
_READ_OPTIONS = pa_json.ReadOptions(use_threads=False, block_size=16 << 20)


class NdjsonReader:
    """Reads the records of a batch that are one JSON object each as one NDJSON text, for
    a reader schema that is a struct without maps (pyarrow's reader does not convert
    maps)."""

    def __init__(self, root, framed: bool):
        self.root = root  # the reader schema's compiled Node
        self.framed = framed
        self._parse_options = self._make_parse_options()

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_parse_options"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._parse_options = self._make_parse_options()

    def _make_parse_options(self):
        return pa_json.ParseOptions(
            explicit_schema=pa.schema(list(self.root.read_type)),
            unexpected_field_behavior="ignore",
            newlines_in_values=False,
        )

    def candidates(self, frames, ok):
        """Rows (of the ``ok`` ones) this reader can take: framed or plain payloads that
        start with '{' and hold no raw newline (each is then exactly one line, read as
        exactly one row)."""
        data = frames.data
        rows = np.flatnonzero(ok & (frames.ends > frames.starts))
        if not len(rows):
            return rows
        rows = rows[data[frames.starts[rows]] == _OPEN_BRACE]
        newline_at = np.flatnonzero((data == _NEWLINES[0]) | (data == _NEWLINES[1]))
        if len(newline_at) and len(rows):
            # the row whose payload holds each newline: the last row starting at or before it
            holder = np.searchsorted(frames.starts[rows], newline_at, side="right") - 1
            inside = (holder >= 0) & (newline_at < frames.ends[rows[np.maximum(holder, 0)]])
            rows = np.setdiff1d(rows, rows[holder[inside]], assume_unique=True)
        return rows

    def read(self, frames, rows):
        """The ``rows`` as one struct array of the reader's Arrow type (None: pyarrow
        refused the batch, or read other than one row per record)."""
        if self.framed:
            text = self._framed_text(frames, rows)
        else:
            data = frames.data.tobytes()
            text = b"\n".join(
                [
                    data[s:e]
                    for s, e in zip(
                        frames.starts[rows].tolist(), frames.ends[rows].tolist(), strict=True
                    )
                ]
            )
        try:
            table = pa_json.read_json(
                io.BytesIO(text), read_options=_READ_OPTIONS, parse_options=self._parse_options
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(rows):
            return None
        struct = pa.StructArray.from_arrays(
            [c.combine_chunks() for c in table.columns], fields=list(table.schema)
        )
        if struct.type != self.root.arrow_type:
            try:
                struct = struct.cast(self.root.arrow_type)  # date strings -> date32
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        return struct

    @staticmethod
    def _framed_text(frames, rows):
        """The data buffer as NDJSON, in place: each chosen row's header becomes "\\n" and
        spaces; every other byte not in a chosen payload becomes a space."""
        buffer = frames.data.copy()
        chosen = np.zeros(len(frames.starts), dtype=bool)
        chosen[rows] = True
        header_starts = frames.starts - HEADER_SIZE
        # blank rows not read in the batch (bad or parsed one by one): their whole value
        begins = np.where(frames.readable, header_starts, frames.starts)
        for row in np.flatnonzero(~chosen & (frames.ends > begins)).tolist():
            buffer[begins[row] : frames.ends[row]] = 0x20
        buffer[header_starts[rows]] = ord("\n")
        for k in range(1, HEADER_SIZE):
            buffer[header_starts[rows] + k] = 0x20
        return buffer[header_starts[rows[0]] : frames.ends[rows[-1]]].tobytes()
