"""Typed keys and values: Confluent-framed Avro, Protobuf and JSON, decoded and encoded
column-wise. The contract every codec keeps, and :func:`~.codecs.make_codec`: ``codecs.py``."""
