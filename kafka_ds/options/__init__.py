"""User-facing options, each declared once as an :class:`~.core.Option` (name, the queries it
applies to, default, parser and bounds, doc); the declarations drive parsing, validation and
the option tables of the docs (``python docs/generate.py``). Every error is a
``ConfigurationError`` raised on the driver at planning time, naming the option and the fix.

By concern: ``core`` (the machinery: parsers, modes, ``Option``/``Forbidden``),
``*_declarations`` (the options, by what they configure), ``names`` (other known names,
``strictOptions``), ``registry`` (all declarations and the checks that consult them),
``subscription`` and ``offset_spec`` (options with parsers of their own), ``read`` and
``write`` (the whole configurations, :class:`ReadOptions`/:class:`WriteOptions`),
``tables`` (the docs' tables). Adding an option: declare it in the declarations module of its
concern (its ``field`` is the attribute it fills on ``ReadOptions``, ``WriteOptions``,
``ClientConfig`` or ``ProducerConfig``), then run ``python docs/generate.py``.
"""

from .read import ReadOptions, parse_read_options
from .registry import check_option_names
from .write import WriteOptions, parse_write_options

__all__ = [
    "ReadOptions",
    "WriteOptions",
    "check_option_names",
    "parse_read_options",
    "parse_write_options",
]
