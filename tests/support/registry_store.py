"""The fake Schema Registry's store: schemas by id, subjects' versions, compatibility levels,
and what each REST call does to them (``schema_registry.py`` is the HTTP side and lists the
deviations from the real registry)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from tests.support import avro_compat

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)


class RegistryError(Exception):
    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status, self.error_code, self.message = status, error_code, message


@dataclass
class Stored:
    schema_id: int
    schema_type: str
    text: str
    references: list
    key: tuple


@dataclass
class Version:
    version: int
    schema_id: int
    deleted: bool = False


class RegistryStore:
    """The registry's state; not thread-safe (the server holds its lock around each call)."""

    def __init__(self):
        self.schemas: dict[int, Stored] = {}
        self._ids_by_key: dict[tuple, int] = {}
        self.subjects: dict[str, list[Version]] = {}
        self.global_level = "BACKWARD"
        self.subject_levels: dict[str, str] = {}

    def _live(self, subject, deleted=False) -> list[Version]:
        versions = [v for v in self.subjects.get(subject, ()) if deleted or not v.deleted]
        if not versions:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        return versions

    def _version(self, subject, version, deleted=False) -> Version:
        versions = self._live(subject, deleted)
        if version in ("latest", "-1"):
            return versions[-1]
        try:
            number = int(version)
            if number < 1:
                raise ValueError
        except ValueError:
            raise RegistryError(
                422,
                42202,
                f"The specified version '{version}' is not a valid "
                "version id. Allowed values are between [1, 2^31-1] and the "
                'string "latest"',
            ) from None
        for v in versions:
            if v.version == number:
                return v
        raise RegistryError(404, 40402, f"Version {number} not found.")

    def _schema(self, schema_id) -> Stored:
        try:
            return self.schemas[int(schema_id)]
        except (KeyError, ValueError):
            raise RegistryError(404, 40403, f"Schema {schema_id} not found") from None

    def _schema_answer(self, stored: Stored, fmt=None) -> dict:
        answer: dict[str, object] = {"schema": self._render(stored, fmt)}
        if stored.schema_type != "AVRO":
            answer["schemaType"] = stored.schema_type
        if stored.references:
            answer["references"] = stored.references
        return answer

    def _render(self, stored: Stored, fmt) -> str:
        if (
            fmt == "serialized"
            and stored.schema_type == "PROTOBUF"
            and _file_descriptor(stored.text) is None
        ):
            raise RegistryError(
                422,
                42201,
                "the fake registry cannot render .proto text as "
                "format=serialized (register the base64 form)",
            )
        return stored.text

    def _describe(self, subject, version: Version, fmt=None) -> dict:
        stored = self.schemas[version.schema_id]
        return {
            "subject": subject,
            "version": version.version,
            "id": stored.schema_id,
            **self._schema_answer(stored, fmt),
        }

    def _parse_body(self, body) -> tuple:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryError(422, 42201, "Invalid schema: the request has no 'schema' text")
        schema_type = (body.get("schemaType") or "AVRO").upper()
        references = [
            {"name": r["name"], "subject": r["subject"], "version": int(r["version"])}
            for r in body.get("references") or ()
        ]
        text = body["schema"]
        self._validate(schema_type, text, references)
        canonical = text
        if schema_type in ("AVRO", "JSON"):
            canonical = json.dumps(json.loads(text), separators=(",", ":"))
        key = (
            schema_type,
            canonical,
            tuple((r["name"], r["subject"], r["version"]) for r in references),
        )
        return schema_type, text, references, key

    def _validate(self, schema_type, text, references) -> None:
        try:
            for ref in references:
                self._version(ref["subject"], str(ref["version"]))
        except RegistryError as exc:
            raise RegistryError(422, 42201, f"Invalid schema: reference {exc.message}") from None
        if schema_type == "AVRO":
            try:
                import fastavro

                fastavro.parse_schema(json.loads(text), named_schemas=self._avro_named(references))
            except Exception as exc:  # fastavro raises several kinds
                raise RegistryError(422, 42201, f"Invalid schema {text[:100]}: {exc}") from None
        elif schema_type == "JSON":
            try:
                import jsonschema  # type: ignore[import-untyped]  # no types-jsonschema here

                schema = json.loads(text)
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except Exception as exc:
                raise RegistryError(422, 42201, f"Invalid schema {text[:100]}: {exc}") from None
        elif schema_type == "PROTOBUF":
            if not text.strip():
                raise RegistryError(422, 42201, "Invalid schema: empty Protobuf schema")
        else:
            raise RegistryError(422, 42201, f"Invalid schema type {schema_type}")

    def _avro_named(self, references, out=None) -> dict:
        """fastavro's named-schema table from the references (depth first)."""
        import fastavro

        out = {} if out is None else out
        for ref in references:
            stored = self.schemas[self._version(ref["subject"], str(ref["version"])).schema_id]
            self._avro_named(stored.references, out)
            fastavro.parse_schema(json.loads(stored.text), named_schemas=out)
        return out

    def _compat_named(self, references, out=None) -> dict:
        """avro_compat's named-type table from the references."""
        out = {} if out is None else out
        for ref in references:
            stored = self.schemas[self._version(ref["subject"], str(ref["version"])).schema_id]
            self._compat_named(stored.references, out)
            out.update(avro_compat.parse(stored.text, out)[1])
        return out

    def _register(self, subject, body) -> int:
        schema_type, text, references, key = self._parse_body(body)
        versions = [v for v in self.subjects.get(subject, ()) if not v.deleted]
        for v in versions:
            if self.schemas[v.schema_id].key == key:
                return v.schema_id
        problems = self._problems(
            subject, schema_type, text, references, versions, self._level_of(subject)
        )
        if problems:
            raise RegistryError(
                409,
                409,
                "Schema being registered is incompatible with an "
                f'earlier schema for subject "{subject}", details: '
                f"{problems}",
            )
        schema_id = self._ids_by_key.get(key)
        if schema_id is None:
            schema_id = self._ids_by_key[key] = len(self.schemas) + 1
            self.schemas[schema_id] = Stored(schema_id, schema_type, text, references, key)
        every = self.subjects.setdefault(subject, [])
        every.append(Version(max((v.version for v in every), default=0) + 1, schema_id))
        return schema_id

    def _level_of(self, subject) -> str:
        return self.subject_levels.get(subject, self.global_level)

    def _problems(self, subject, schema_type, text, references, versions, level) -> list[str]:
        """Why the candidate breaks ``level`` against ``versions`` (oldest first)."""
        if level == "NONE" or not versions:
            return []
        if not level.endswith("_TRANSITIVE"):
            versions = versions[-1:]
        problems = []
        for v in versions:
            old = self.schemas[v.schema_id]
            if old.schema_type != schema_type:
                problems.append(
                    f"Incompatible because of different schema type: version "
                    f"{v.version} is {old.schema_type}, the new schema {schema_type}"
                )
                continue
            if schema_type != "AVRO":
                continue  # deviation: any JSON/PROTOBUF change is accepted
            new_named = self._compat_named(references)
            old_named = self._compat_named(old.references)
            if level.startswith(("BACKWARD", "FULL")):
                problems += [
                    f"{p} (new schema reading version {v.version})"
                    for p in avro_compat.incompatibilities(text, old.text, new_named, old_named)
                ]
            if level.startswith(("FORWARD", "FULL")):
                problems += [
                    f"{p} (version {v.version} reading the new schema)"
                    for p in avro_compat.incompatibilities(old.text, text, old_named, new_named)
                ]
        return problems

    def _lookup(self, subject, body, deleted) -> dict:
        versions = self._live(subject, deleted)
        _, _, _, key = self._parse_body(body)
        for v in reversed(versions):
            if self.schemas[v.schema_id].key == key:
                return self._describe(subject, v)
        raise RegistryError(404, 40403, "Schema not found")

    def _delete(self, subject, version, permanent) -> list[int]:
        every = self.subjects.get(subject)
        if not every:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        if version is None:  # soft: the live versions; permanent: all, soft-deleted first
            chosen = list(every) if permanent else [v for v in every if not v.deleted]
        else:
            chosen = [self._version(subject, version, deleted=permanent)]
        if permanent:
            if any(not v.deleted for v in chosen):
                raise RegistryError(
                    404,
                    40405 if version is None else 40407,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            self.subjects[subject] = [v for v in every if v not in chosen]
            if not self.subjects[subject]:
                del self.subjects[subject]
        else:
            if not chosen:
                raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.")
            for v in chosen:
                v.deleted = True
        return [v.version for v in chosen]

    def _test_compatibility(self, subject, body, version, query) -> dict:
        schema_type, text, references, _ = self._parse_body(body)
        level = self._level_of(subject)
        if version is None:  # all versions
            versions = [v for v in self.subjects.get(subject, ()) if not v.deleted]
            level = (
                level if level.endswith("_TRANSITIVE") or level == "NONE" else f"{level}_TRANSITIVE"
            )
        elif version in ("latest", "-1") and not any(
            not v.deleted for v in self.subjects.get(subject, ())
        ):
            versions = []  # as the registry: nothing to break yet
        else:
            versions = [self._version(subject, version)]
            level = level.removesuffix("_TRANSITIVE")
        problems = self._problems(subject, schema_type, text, references, versions, level)
        answer: dict[str, object] = {"is_compatible": not problems}
        if flag(query, "verbose"):
            answer["messages"] = problems
        return answer


def flag(query: dict, name: str) -> bool:
    return query.get(name, "false").lower() == "true"


def parse_level(body) -> str:
    level = (body or {}).get("compatibility") or (body or {}).get("compatibilityLevel")
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise RegistryError(
            422, 42203, f"Invalid compatibility level. Valid values are {', '.join(LEVELS)}"
        )
    return level.upper()


def _file_descriptor(text: str):
    """The FileDescriptorProto in base64 ``text``, or None when it is not one."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
