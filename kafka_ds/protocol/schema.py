"""A small data language for Kafka messages, and the one codec that interprets it.

Messages are written once, as data, the way Apache Kafka's JSON message
definitions are: each field has a Kafka name, a type, the versions it exists
in, the versions it may be null in, and (for flexible versions) an optional
tag. ``compile_codec(message, version, "request"|"response")`` turns that
description into an encoder and a decoder for one version, cached.

Values are plain dicts keyed by snake_case field names (``ThrottleTimeMs`` ->
``throttle_time_ms``). Decoding fills fields that do not exist in the version
with their defaults, so code reading a response does not depend on the version.
``bytes`` and ``records`` fields decode to zero-copy slices of the input buffer.

Encoding is strict about names, lenient about versions: a key that names no field of
the message at that nesting level, in any version, raises :class:`UnknownFieldError`
(a misspelt ``"timestmap"`` would otherwise go out as the default); a field the chosen
version lacks is left out, and a field the body omits is sent as its default, so
callers write only what differs from the defaults (``Message.body`` checks the names
before a version is chosen).
"""

from __future__ import annotations

import difflib
import re
import uuid as _uuid
from dataclasses import dataclass
from dataclasses import field as dc_field
from functools import cache

from ..errors import KafkaProtocolError, UnknownFieldError
from . import primitives as p

_SNAKE_1 = re.compile(r"(.)([A-Z][a-z]+)")
_SNAKE_2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    return _SNAKE_2.sub(r"\1_\2", _SNAKE_1.sub(r"\1_\2", name)).lower()


@dataclass(frozen=True)
class Versions:
    """A version range as Kafka writes it: "0+", "3-7", "5", or "none"."""

    low: int
    high: int  # inclusive; a large number for "N+"

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "" or text == "none":
            return cls(1, 0)  # empty
        if text.endswith("+"):
            return cls(int(text[:-1]), 1 << 15)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high


@dataclass(frozen=True)
class Field:
    """One field of a message or struct, with Kafka's names and version ranges."""

    name: str
    type: str
    versions: str = "0+"
    fields: tuple = ()
    nullable_versions: str = "none"
    tagged_versions: str = "none"
    tag: int | None = None
    default: object = None  # None: the type's zero value; "null" as in Kafka's JSON
    snake: str = dc_field(init=False, default="")

    def __post_init__(self):
        object.__setattr__(self, "snake", snake_case(self.name))
        object.__setattr__(self, "fields", tuple(self.fields))


def F(name, type_, versions="0+", *fields, nullable=None, tagged=None, tag=None, default=None):
    """Short constructor used by the message definitions."""
    if tag is not None and tagged is None:
        tagged = versions
    return Field(
        name, type_, versions, tuple(fields), nullable or "none", tagged or "none", tag, default
    )


@dataclass(frozen=True)
class Message:
    """One Kafka API: key, supported version range, flexible cut-off, both bodies."""

    name: str
    api_key: int
    valid_versions: str
    flexible_versions: str
    request: tuple
    response: tuple

    def versions(self) -> Versions:
        return Versions.parse(self.valid_versions)

    def body(self, **values) -> dict:
        """A request body from keyword arguments. Top-level names are checked here, before
        a version is chosen; nested ones when the body is encoded.

        Leave out what the defaults cover: the codec sends each omitted field as its
        default, and leaves out fields the negotiated version lacks.
        """
        _check_names(values, self.request, f"{self.name} request")
        return values

    def is_flexible(self, version: int) -> bool:
        return version in Versions.parse(self.flexible_versions)

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions responses always use header v0 so that a client that
        # guessed too high a version can still read the error code.
        if self.api_key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0


# --- the codec ----------------------------------------------------------------

_FIXED = {
    "int8": (p.read_int8, p.write_int8, 0),
    "int16": (p.read_int16, p.write_int16, 0),
    "int32": (p.read_int32, p.write_int32, 0),
    "int64": (p.read_int64, p.write_int64, 0),
    "uint16": (p.read_uint16, p.write_uint16, 0),
    "uint32": (p.read_uint32, p.write_uint32, 0),
    "float64": (p.read_float64, p.write_float64, 0.0),
    "bool": (p.read_bool, p.write_bool, False),
    "uuid": (p.read_uuid, p.write_uuid, p.ZERO_UUID),
}


def _scalar_codec(type_name: str, flexible: bool, nullable: bool):
    """(read, write, default) for a non-struct element type."""
    if type_name in _FIXED:
        return _FIXED[type_name]
    if type_name == "string":
        if flexible:
            read = p.read_compact_nullable_string if nullable else p.read_compact_string
            write = p.write_compact_nullable_string if nullable else p.write_compact_string
        else:
            read = p.read_nullable_string if nullable else p.read_string
            write = p.write_nullable_string if nullable else p.write_string
        return read, write, None if nullable else ""
    if type_name in ("bytes", "records"):
        if flexible:
            read = p.read_compact_nullable_bytes if nullable else p.read_compact_bytes
            write = p.write_compact_nullable_bytes if nullable else p.write_compact_bytes
        else:
            read = p.read_nullable_bytes if nullable else p.read_bytes
            write = p.write_nullable_bytes if nullable else p.write_bytes
        return read, write, None if nullable else b""
    raise KafkaProtocolError(f"unknown field type {type_name!r}")


def _field_default(fld: Field, nullable: bool):
    if fld.default == "null":  # Kafka's ``"default": "null"``, also where the field is absent
        return None
    if fld.default is not None:
        if fld.type == "uuid" and isinstance(fld.default, str):
            return _uuid.UUID(fld.default)
        return fld.default
    if fld.type.startswith("[]"):
        return None if nullable else []
    if fld.fields:  # a struct
        return None
    return _scalar_codec(fld.type, False, nullable)[2]


def _value_codec(fld: Field, version: int, flexible: bool, where: str):
    """(read, write) for one field's value at one version."""
    nullable = version in Versions.parse(fld.nullable_versions)
    if fld.type.startswith("[]"):
        element_type = fld.type[2:]
        if fld.fields:
            read_el, write_el = _struct_codec(fld.fields, version, flexible, f"{where}[]")
        else:
            read_el, write_el, _ = _scalar_codec(element_type, flexible, False)

        def read_array(buf, pos):
            count, pos = p.read_array_length(buf, pos, flexible, nullable)
            if count is None:
                return None, pos
            items: list = []
            append = items.append
            for _ in range(count):
                item, pos = read_el(buf, pos)
                append(item)
            return items, pos

        def write_array(out, items):
            if items is None:
                if not nullable:
                    raise KafkaProtocolError(f"array {fld.name} is not nullable at v{version}")
                p.write_array_length(out, None, flexible)
                return
            p.write_array_length(out, len(items), flexible)
            for item in items:
                write_el(out, item)

        return read_array, write_array
    if fld.fields:  # a nested struct (nullable structs are not used by our APIs)
        return _struct_codec(fld.fields, version, flexible, where)
    read, write, _ = _scalar_codec(fld.type, flexible, nullable)
    return read, write


def _skip_tagged(buf, pos):
    count, pos = p.read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = p.read_uvarint(buf, pos)
        size, pos = p.read_uvarint(buf, pos)
        if pos + size > len(buf):
            raise KafkaProtocolError(f"tagged field of {size} bytes overruns buffer at {pos}")
        pos += size
    return pos


def _check_names(value: dict, fields: tuple, where: str) -> None:
    """Raise UnknownFieldError for a key of ``value`` that names none of ``fields``."""
    known = {fld.snake for fld in fields}
    for key in value:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UnknownFieldError(
                f"{where}: no field {key!r} in any version{hint} "
                f"(fields: {', '.join(sorted(known))})"
            )


def _struct_codec(fields: tuple, version: int, flexible: bool, where: str = "struct"):
    """Compile a list of fields into (read(buf, pos) -> (dict, pos), write(out, dict)).

    ``where`` names the message, version and nesting path in errors.
    """
    known = frozenset(fld.snake for fld in fields)  # in any version: see the module doc
    listed = []  # (snake, read, write, default) in wire order
    tagged = {}  # tag -> (snake, read, write, default)
    absent = {}  # snake -> default, for fields not in this version
    for fld in fields:
        nullable = version in Versions.parse(fld.nullable_versions)
        default = _field_default(fld, nullable)
        if version not in Versions.parse(fld.versions):
            absent[fld.snake] = default
            continue
        read, write = _value_codec(fld, version, flexible, f"{where}.{fld.snake}")
        if fld.tag is not None and flexible and version in Versions.parse(fld.tagged_versions):
            tagged[fld.tag] = (fld.snake, read, write, default)
            absent[fld.snake] = default
        else:
            listed.append((fld.snake, read, write, default))
    plain = tuple(listed)
    tagged_sorted = tuple(sorted(tagged.items()))

    def read_struct(buf, pos):
        value = dict(absent)
        for snake, read, _write, _default in plain:
            value[snake], pos = read(buf, pos)
        if flexible:
            count, pos = p.read_uvarint(buf, pos)
            for _ in range(count):
                tag, pos = p.read_uvarint(buf, pos)
                size, pos = p.read_uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise KafkaProtocolError(f"tagged field {tag} of {size} bytes overruns buffer")
                known = tagged.get(tag)
                if known is not None:
                    value[known[0]], used = known[1](buf[:end], pos)
                    if used != end:
                        raise KafkaProtocolError(f"tagged field {tag} size mismatch")
                pos = end  # unknown tags are skipped, as the protocol requires
        return value, pos

    def write_struct(out, value):
        if not known.issuperset(value):
            _check_names(value, fields, where)
        get = value.get
        for snake, _read, write, default in plain:
            v = get(snake, default)
            write(out, default if v is None and default is not None else v)
        if flexible:
            present = []
            for tag, (snake, _read, write, default) in tagged_sorted:
                v = get(snake, default)
                if v is None or v == default:
                    continue
                body = bytearray()
                write(body, v)
                present.append((tag, body))
            p.write_uvarint(out, len(present))
            for tag, body in present:
                p.write_uvarint(out, tag)
                p.write_uvarint(out, len(body))
                out += body

    return read_struct, write_struct


@cache
def compile_codec(message: Message, version: int, kind: str):
    """Encoder and decoder for ``message`` body at ``version`` (kind: request|response)."""
    if version not in message.versions():
        raise KafkaProtocolError(
            f"{message.name} v{version} is outside supported range {message.valid_versions}"
        )
    fields = message.request if kind == "request" else message.response
    return _struct_codec(
        fields, version, message.is_flexible(version), f"{message.name} v{version} {kind}"
    )


# --- headers and whole frames -------------------------------------------------


def encode_request(
    message: Message, version: int, correlation_id: int, client_id: str | None, body: dict
) -> bytearray:
    """A full request frame, including the int32 size prefix."""
    out = bytearray(b"\0\0\0\0")
    out += p.INT16.pack(message.api_key)
    out += p.INT16.pack(version)
    out += p.INT32.pack(correlation_id)
    header_version = message.request_header_version(version)
    if header_version >= 1:
        # client_id is a classic (int16) nullable string even in header v2.
        p.write_nullable_string(out, client_id)
    if header_version >= 2:
        out.append(0)  # no tagged fields
    _read, write = compile_codec(message, version, "request")
    write(out, body)
    p.INT32.pack_into(out, 0, len(out) - 4)
    return out


def decode_request(message: Message, buf) -> tuple[dict, dict]:
    """Decode a request frame without size prefix: (header, body). Used by tests/fakes."""
    buf = memoryview(buf)
    api_key, pos = p.read_int16(buf, 0)
    version, pos = p.read_int16(buf, pos)
    correlation_id, pos = p.read_int32(buf, pos)
    header = {"api_key": api_key, "api_version": version, "correlation_id": correlation_id}
    header_version = message.request_header_version(version)
    if header_version >= 1:
        header["client_id"], pos = p.read_nullable_string(buf, pos)
    if header_version >= 2:
        pos = _skip_tagged(buf, pos)
    read, _write = compile_codec(message, version, "request")
    body, pos = read(buf, pos)
    return header, body


def read_response_correlation_id(buf) -> int:
    return p.read_int32(buf, 0)[0]


def decode_response(message: Message, version: int, buf) -> dict:
    """Decode a response frame (without its size prefix) into the body dict."""
    buf = memoryview(buf)
    pos = 4  # correlation id, checked by the connection
    if message.response_header_version(version) >= 1:
        pos = _skip_tagged(buf, pos)
    read, _write = compile_codec(message, version, "response")
    body, pos = read(buf, pos)
    return body


def encode_response(message: Message, version: int, correlation_id: int, body: dict) -> bytearray:
    """A full response frame with size prefix. Used by golden tests and fault-injecting fakes."""
    out = bytearray(b"\0\0\0\0")
    out += p.INT32.pack(correlation_id)
    if message.response_header_version(version) >= 1:
        out.append(0)
    _read, write = compile_codec(message, version, "response")
    write(out, body)
    p.INT32.pack_into(out, 0, len(out) - 4)
    return out
