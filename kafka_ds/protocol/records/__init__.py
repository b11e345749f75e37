"""Kafka record batches <-> Apache Arrow (package; see the modules)."""
from . import v2 as _v2
from .v2 import *  # noqa: F401,F403

globals().update({k: v for k, v in vars(_v2).items() if not k.startswith("__")})
