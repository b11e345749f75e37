"""The option machinery: value parsers, the modes an option applies to, the :class:`Option`
and :class:`Forbidden` declaration types, and the helpers every parser of options shares.
Nothing here knows which options exist (that is :mod:`kafka_ds.options.registry`).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from ..errors import ConfigurationError

INT32_MAX = 2147483647

# --- value parsers: text -> value, or ValueError(what was expected) ----------------------


def text(raw) -> str:
    return str(raw)


def integer(raw) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError("an integer") from None


class Choice:
    """A parser of one of a few named values (any case) -> its value. ``choices``: the
    names an error names, the candidates of its "did you mean"."""

    def __init__(self, mapping: dict, expected: str, choices: tuple[str, ...]):
        self.lowered = {key.lower(): value for key, value in mapping.items()}
        self.expected = expected
        self.choices = choices

    def __call__(self, raw: Any) -> Any:
        key = str(raw).strip().lower()
        if key not in self.lowered:
            raise ValueError(self.expected)
        return self.lowered[key]


boolean = Choice({"true": True, "false": False}, "'true' or 'false'", ("true", "false"))


_DURATION_UNITS = (("ms", 1), ("s", 1000), ("m", 60000), ("h", 3600000), ("d", 86400000))


def duration_ms(raw) -> int:
    """'15m', '30s', '500ms', '2h' or plain milliseconds."""
    value = str(raw).strip().lower()
    for suffix, factor in _DURATION_UNITS:
        number = value[: -len(suffix)].strip()
        if value.endswith(suffix) and number.replace(".", "", 1).isdigit():
            return int(float(number) * factor)
    if value.isdigit():
        return int(value)
    raise ValueError("a duration like '15m', '30s' or '500ms'")


def choice(mapping: dict, expected: str = "", hidden: tuple = ()) -> Choice:
    """One of ``mapping``'s keys (any case) -> its value. ``parse.choices``: the keys an
    error names (all but the ``hidden`` aliases), the candidates of its "did you mean"."""
    choices = tuple(key for key in mapping if key not in hidden)
    names = [f"'{key}'" for key in choices]
    expected = expected or (
        ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
    )
    return Choice(mapping, expected, choices)


def closest(word, candidates, n: int = 1) -> list[str]:
    """The (up to ``n``) ``candidates`` nearest to ``word`` ignoring case, nearest first,
    as the candidates spell them: those about as near as the nearest (so 'startingOffset'
    gets 'startingOffsets' alone, not 'startingOffsetsFallback'); none when nothing is
    close."""
    word = str(word).strip().lower()
    scored = sorted(
        (
            (difflib.SequenceMatcher(None, word, str(c).lower()).ratio(), i, c)
            for i, c in enumerate(candidates)
        ),
        key=lambda t: (-t[0], t[1]),
    )
    if not scored or scored[0][0] < 0.6:
        return []
    return [c for ratio, _, c in scored[:n] if ratio >= scored[0][0] - 0.05]


def did_you_mean(names: list[str]) -> str:
    """ "; did you mean 'a'?" / "; did you mean 'a' or 'b'?" ("" for no names)."""
    if not names:
        return ""
    quoted = [f"'{name}'" for name in names]
    return (
        "; did you mean "
        + (", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0])
        + "?"
    )


# --- modes and declaration types ------------------------------------------------------

BATCH, STREAM, WRITE = "batch read", "streaming read", "write"
READ = frozenset({BATCH, STREAM})
READ_WRITE = READ | {WRITE}


@dataclass(frozen=True)
class ByMode:
    """A default that differs between reads and writes."""

    read: Any
    write: Any


@dataclass(frozen=True)
class Option:
    """One user-facing option.

    ``default`` is the value when the option is not set: a ``str`` is written as a user
    would write it and goes through ``parse``; ``None`` means unset. ``parse=None``: a
    dedicated function parses it (subscription, offsets), declared for docs and checks.
    ``field``: the attribute the value fills (see :mod:`kafka_ds.options`).
    """

    name: str
    applies: frozenset
    doc: str
    parse: Callable[[Any], Any] | None = None
    default: Any = None
    field: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    example: str | None = None  # a valid value, shown in errors
    shown_default: str | None = None  # the docs' default when not simply `default`

    def __post_init__(self):
        if self.parse is integer and self.name.startswith("kafka.") and self.maximum is None:
            # Kafka's int settings; they end up in int32 wire fields.
            object.__setattr__(self, "maximum", INT32_MAX)

    def default_for(self, modes: frozenset):
        default = self.default
        if isinstance(default, ByMode):
            default = default.write if WRITE in modes else default.read
        if isinstance(default, str) and self.parse is not None:
            default = self.parse(default)
        return default

    def value(self, options: dict, modes: frozenset):
        """The parsed, checked value in ``options`` (lower-cased keys), else the default."""
        raw = options.get(self.name.lower())
        return self.default_for(modes) if raw is None else self.check(raw)

    def check(self, raw):
        if self.parse is None:
            raise TypeError(f"option {self.name!r} is parsed by a function of its own")
        try:
            value = self.parse(raw)
        except ValueError as exc:
            # An enumerated value names the nearest allowed one (and writes the option with it).
            near = closest(raw, getattr(self.parse, "choices", ()))
            fix = (
                f'{did_you_mean(near)} (.option("{self.name}", "{near[0]}"))'
                if near
                else self._fix()
            )
            raise ConfigurationError(
                f"Option '{self.name}' must be {exc}, got {raw!r}{fix}"
            ) from None
        if self.minimum is not None and value < self.minimum:
            raise ConfigurationError(
                f"Option '{self.name}' must be at least {self.minimum}, got {value}{self._fix()}"
            )
        if self.maximum is not None and value > self.maximum:
            raise ConfigurationError(
                f"Option '{self.name}' must be at most {self.maximum}, got {value}{self._fix()}"
            )
        return value

    def _fix(self) -> str:
        default = self.default.read if isinstance(self.default, ByMode) else self.default
        example = self.example or _plain(default)
        return f'; e.g. .option("{self.name}", "{example}")' if example else ""

    def markdown_default(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if isinstance(self.default, ByMode):
            return f"read: `{_plain(self.default.read)}`, write: `{_plain(self.default.write)}`"
        return f"`{_plain(self.default)}`" if self.default is not None else ""

    def markdown_applies(self) -> str:
        if self.applies >= READ:
            return "read, write" if WRITE in self.applies else "read"
        return ", ".join(sorted(self.applies))


def _plain(value) -> str:
    if value is None or isinstance(value, ByMode):
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Forbidden:
    """A Kafka client setting Spark's connector rejects (or that cannot work here)."""

    name: str
    applies: frozenset
    reason: str  # Spark's words where Spark rejects it
    fix: str

    def error(self) -> ConfigurationError:
        # Spark names the Kafka setting without the source's "kafka." prefix.
        short = self.name[len("kafka.") :] if self.name.startswith("kafka.") else self.name
        return ConfigurationError(
            f"Kafka option '{short}' is not supported{self.reason} (option '{self.name}'): "
            f"{self.fix}."
        )


# --- helpers shared by the parsers of options -----------------------------------------


def lower_keys(options) -> dict[str, str]:
    """Spark option keys are case-insensitive: normalise to lower case."""
    return {str(k).lower(): v for k, v in dict(options).items()}


def kafka_params(options: dict[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix removed (keys lower-cased)."""
    return {k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.")}


def fields_of(cls, values: dict, **overrides) -> dict:
    """The entries of ``values`` that are fields of the dataclass ``cls``."""
    picked = {f.name: values[f.name] for f in fields(cls) if f.name in values}
    return {**picked, **overrides}


def _checked(options, key, parse, default, minimum=None):
    raw = options.get(key.lower())
    if raw is None:
        return default
    return Option(key, READ_WRITE, "", parse, minimum=minimum).check(raw)


def parse_bool(options, key, default: bool) -> bool:
    return _checked(options, key, boolean, default)


def parse_int(options, key, default=None, minimum=None):
    return _checked(options, key, integer, default, minimum)


def parse_duration_ms(options, key, default_ms):
    """'15m', '30s', '500ms', '2h' or plain milliseconds."""
    return _checked(options, key, duration_ms, default_ms)


def parse_json(options, key):
    """The JSON value of option ``key`` (present in ``options``)."""
    raw = options[key.lower()]
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"Option '{key}' is not valid JSON ({exc}): {raw!r}") from None
