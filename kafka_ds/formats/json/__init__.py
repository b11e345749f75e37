"""JSON values: the codec (codec.py), JSON Schema as Spark types (schema.py,
spark.py), encoding (encode.py) and references."""
