"""The ``kafka.sasl.jaas.config`` entry: a JAAS login module line, tokenized the way
Kafka's JaasConfig does (quotes, escapes, comments), into (login module, options).
"""

from __future__ import annotations

from ...errors import ConfigurationError

_JAAS_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _is_word_char(c: str) -> bool:
    # Kafka's JaasConfig tokenizer: codes 33..128 and >= 160 are word characters,
    # except the ordinary ';' and '=', the comment '/' and the quotes.
    code = ord(c)
    return (33 <= code <= 128 or code >= 160) and c not in ";=/\"'"


def _jaas_tokens(text: str):
    """Tokens of a JAAS entry: ("word", text), ("quoted", text), (";"), ("=")."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if ord(c) <= 32:
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # "//" and a lone "/" both comment out the rest of the line
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
        elif c in ";=":
            yield (c, c)
            i += 1
        elif c in "\"'":
            out, i = [], i + 1
            while i < n and text[i] not in (c, "\n", "\r"):
                ch = text[i]
                if ch == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    if nxt in "01234567":
                        j = i + 1
                        while j < n and j < i + 4 and text[j] in "01234567":
                            j += 1
                        value = int(text[i + 1 : j], 8)
                        if value > 0o377:  # StreamTokenizer takes at most \377
                            j -= 1
                            value = int(text[i + 1 : j], 8)
                        out.append(chr(value))
                        i = j
                        continue
                    out.append(_ESCAPES.get(nxt, nxt))
                    i += 2
                    continue
                out.append(ch)
                i += 1
            i += 1  # the closing quote (or the line end that ended the string)
            yield ("quoted", "".join(out))
        elif _is_word_char(c):
            start = i
            while i < n and _is_word_char(text[i]):
                i += 1
            yield ("word", text[start:i])
        else:  # an ordinary character StreamTokenizer returns on its own
            yield ("other", c)
            i += 1


def parse_jaas_config(text: str, option: str = "kafka.sasl.jaas.config"):
    """``<LoginModule> <flag> (key=value)*;`` -> (login module class, options dict).

    Follows Kafka's JaasConfig tokenizer (quotes, escapes, comments). The error
    messages never quote values: they may be passwords.
    """
    tokens = list(_jaas_tokens(text))
    entries = []
    pos = 0
    while pos < len(tokens):
        kind, module = tokens[pos]
        if kind not in ("word", "quoted"):
            raise ConfigurationError(
                f"Option '{option}': expected a login module class name, found {module!r}"
            )
        pos += 1
        if pos >= len(tokens) or tokens[pos][0] not in ("word", "quoted"):
            raise ConfigurationError(
                f"Option '{option}': login module control flag (e.g. "
                "'required') not specified after " + module
            )
        flag = tokens[pos][1]
        if flag.upper() not in _JAAS_FLAGS:
            raise ConfigurationError(
                f"Option '{option}': invalid login module control flag {flag!r}; use 'required'"
            )
        pos += 1
        options = {}
        while pos < len(tokens) and tokens[pos][0] != ";":
            kind, key = tokens[pos]
            if (
                kind not in ("word", "quoted")
                or pos + 2 >= len(tokens)
                or tokens[pos + 1][0] != "="
                or tokens[pos + 2][0] not in ("word", "quoted")
            ):
                raise ConfigurationError(
                    f"Option '{option}': value not specified for key {key!r} (write key=\"value\")"
                )
            options[key] = tokens[pos + 2][1]
            pos += 3
        if pos >= len(tokens):
            raise ConfigurationError(
                f"Option '{option}': the JAAS entry is not terminated by a semicolon ';'"
            )
        pos += 1
        entries.append((module, options))
    if not entries:
        raise ConfigurationError(f"Option '{option}': no login module specified")
    if len(entries) > 1:
        raise ConfigurationError(
            f"Option '{option}' contains {len(entries)} login modules, should be 1"
        )
    return entries[0]
