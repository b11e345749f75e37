"""Typed keys and values: Confluent-framed Avro, Protobuf and JSON, decoded and encoded
column-wise. The contract every codec keeps is below; which codec a column gets:
:func:`.codecs.make_codec`.

What every codec keeps (``avro/codec.py``, ``protobuf/codec.py``, ``json/codec.py``; for reads also
``record_subjects.SubjectsCodec``, several Protobuf/JSON subjects in one column):

* A codec is built on the driver from a *reader schema* (:class:`kafka_ds.registry.
  RegisteredSchema`, from the registry or given inline) and pickled to the executors.
  ``spark_type`` (a ``simpleString`` such as ``struct<a:int,b:string>``) and ``arrow_type``
  (the Arrow type Spark maps that Spark type to) are known on the driver.
* ``decode(values: pa.BinaryArray) -> DecodedColumn``: one Arrow array of ``arrow_type``,
  same length, null where the input is null (a tombstone) or where the record is bad. The
  bad rows are *reported*, never dropped: ``DecodedColumn.bad_rows`` (row indexes),
  ``reasons`` (one string each: ``not framed``, ``unknown schema id``, ``truncated``,
  ``cannot be resolved to the reader schema``, ...) and ``schema_ids`` (-1 when unknown).
  The caller decides what FAILFAST / PERMISSIVE do with them (it knows topic, partition
  and offsets).
* Framed records (magic byte 0, 4-byte big-endian schema id, Protobuf message indexes)
  carry their writer schema id; writer schemas are looked up with the ``lookup`` given at
  construction (a :class:`kafka_ds.registry.client.SchemaRegistry`, cached per executor process)
  and resolved to the reader schema.
* ``encode(array: pa.Array) -> pa.BinaryArray`` writes the other way, framed with the
  codec's schema id when it has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DecodedColumn:
    """What ``decode`` returns: one column of values, and the rows that did not decode."""

    #: decoded values (pa.Array of the codec's arrow_type), null for null input and bad rows
    array: object
    #: int64 numpy array: indexes of the input rows that could not be decoded
    bad_rows: object = None
    #: one reason per bad row
    reasons: list = field(default_factory=list)
    #: int32 numpy array: writer schema id per bad row (-1: not framed / unknown)
    schema_ids: object = None
