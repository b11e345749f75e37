"""Avro values: the codec (codec.py), Avro schemas as flat types (types.py),
column-wise decoding (columns.py, values.py) and encoding (encode.py), unions as
member structs (members.py), several subjects (subjects.py), references."""
