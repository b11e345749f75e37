"""``valueFormat=debezium-avro`` / ``keyFormat=debezium-avro``: Debezium's change events as
Kafka Connect's Avro converter writes them (Confluent-framed, the writer schema in the
registry). kafka_ds's Avro codec decodes the records column-wise (a schema changed mid-stream
resolved to the reader schema as any Avro writer version); the envelope and Debezium's
``connect.name`` logical types are then read as ``debezium-json`` reads them (codec.py)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from .. import DecodedColumn
from .codec import DebeziumJsonCodec
from .convert import Bad
from .types import from_avro


class DebeziumAvroCodec(DebeziumJsonCodec):
    format_name = "debezium-avro"

    def __init__(self, avro_codec, *, envelope: bool, flatten: bool, drop_tombstones: bool):
        self.avro = avro_codec
        schema = json.loads(avro_codec.reader_schema.schema_str)
        root = from_avro(schema)
        if envelope:
            fields = dict(root.fields)
            missing = {"before", "after", "source", "op"} - set(fields)
            if missing:
                raise ValueError(f"no Debezium envelope (no {', '.join(sorted(missing))})")
            super().__init__(
                fields["after"],
                envelope=True,
                source=fields["source"],
                flatten=flatten,
                drop_tombstones=drop_tombstones,
            )
        else:
            super().__init__(root, envelope=False)

    def decode(self, values: pa.Array) -> DecodedColumn:
        n = len(values)
        result = self.avro.decode(values)
        raw = result.array
        if isinstance(raw, pa.ChunkedArray):
            raw = raw.combine_chunks()
        bad = Bad(n)
        ids: dict[int, int] = {}
        for row, reason, schema_id in zip(
            np.asarray(result.bad_rows).tolist(),
            result.reasons,
            np.asarray(result.schema_ids).tolist(),
            strict=True,
        ):
            mask = np.zeros(n, dtype=bool)
            mask[row] = True
            bad.add(mask, reason)
            ids[row] = schema_id
        array, conversion = self._convert(raw)
        bad.merge(conversion)
        if bad:
            array = array.filter(
                pa.array(~bad.mask, pa.bool_(), mask=bad.mask), null_selection_behavior="emit_null"
            )
        ordered = sorted(bad.reasons)
        return DecodedColumn(
            array=array,
            bad_rows=np.asarray(ordered, dtype=np.int64),
            reasons=[bad.reasons[r] for r in ordered],
            schema_ids=np.asarray([ids.get(r, -1) for r in ordered], dtype=np.int32),
        )
