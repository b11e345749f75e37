"""Protobuf values: the codec (codec.py), descriptors from the registry
(schema.py), Spark and Arrow types (spark.py), column-wise decoding
(columns.py, arrow.py) and encoding (encode.py)."""
