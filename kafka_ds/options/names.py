"""Option names no declaration knows: what else is a known name (the options Spark itself
puts into a data source's options), the ``strictOptions`` declaration, and where the
strictness comes from (the option, else ``$KAFKA_DS_STRICT_OPTIONS``).

A mistyped name (``startingOffset``) would otherwise be ignored without a word and the query
run on the default. The check itself is :func:`kafka_ds.options.registry.check_option_names`.
"""

from __future__ import annotations

import os

from ..errors import ConfigurationError
from .core import READ_WRITE, Option, boolean

# Set once by a platform team, for every query of a Spark application: the environment of
# the Python workers that plan a query (the driver's, or spark.executorEnv.*).
STRICT_ENV = "KAFKA_DS_STRICT_OPTIONS"

STRICT = Option(
    "strictOptions",
    READ_WRITE,
    "An option name kafka_ds does not know (e.g. `startingOffset`) fails the query at "
    "planning instead of being ignored with a warning naming the closest known options. "
    f"Unset: `${STRICT_ENV}` of the planning Python worker (e.g. "
    f"`spark.executorEnv.{STRICT_ENV}=true`), else `false`.",
    boolean,
    False,
)

# Options Spark itself puts into a data source's options (lower case, as they arrive):
# load(path)/save(path)/start(path) add 'path'; writeStream adds 'checkpointLocation', and
# 'queryName' from .queryName(...) (Spark Declarative Pipelines name every flow's query so).
SPARK_INJECTED = frozenset({"path", "checkpointlocation", "queryname"})


def strictness(options: dict) -> str:
    """Why unknown option names fail ("option 'strictOptions'" or the environment
    variable), or "" when they are only warned about."""
    raw = options.get(STRICT.name.lower())
    if raw is not None:
        return "option 'strictOptions' is true" if STRICT.check(raw) else ""
    env = os.environ.get(STRICT_ENV, "").strip()
    if not env:
        return ""
    try:
        strict = boolean(env)
    except ValueError as exc:
        raise ConfigurationError(
            f"Environment variable {STRICT_ENV} must be {exc}, got {env!r}"
        ) from None
    return f"environment variable {STRICT_ENV} is true" if strict else ""
