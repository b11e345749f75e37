"""User-facing options. Each option is declared once as an :class:`Option`: its name, the
queries it applies to, its default, its parser and bounds, and its doc. The declarations
drive parsing and validation and make the README's option tables
(``python -m kafka_ds.options --write-readme`` rewrites them).

Every error here is a :class:`ConfigurationError` raised on the driver at planning time,
naming the option and the fix. The client's and producer's settings are built here, once,
on the driver, as frozen values (:mod:`kafka_ds.client.config`) that executors use as is.

The package:

- :mod:`.core`: the machinery -- value parsers, modes, the ``Option``/``ByMode``/
  ``Forbidden`` types and the helpers every parser shares;
- :mod:`.client_declarations`, :mod:`.read_declarations`, :mod:`.write_declarations`: the
  declarations, by what they configure;
- :mod:`.names`: what else is a known option name (the ones Spark adds), the
  ``strictOptions`` declaration and ``$KAFKA_DS_STRICT_OPTIONS``;
- :mod:`.registry`: ``OPTIONS`` (all of them, in README order), ``BY_NAME``, ``FORBIDDEN``
  and the checks that consult them (unknown names included);
- :mod:`.subscription`, :mod:`.offset_spec`: the options with parsers of their own (which
  topics, which offsets);
- :mod:`.read`, :mod:`.write`: the whole read and write configurations;
- :mod:`.readme`: the README tables and ``python -m kafka_ds.options``.

Adding an option: declare it in the declarations module of its concern (its ``field`` is
the attribute it fills on ``ReadOptions``, ``WriteOptions``, ``ClientConfig`` or
``ProducerConfig`` -- add that attribute there), then run
``python -m kafka_ds.options --write-readme``.
"""
# Re-exported: the names imported from kafka_ds.options.
from .client_declarations import (  # noqa: F401
    BOOTSTRAP, CLIENT_OPTIONS, check_bootstrap, parse_security,
)
from .core import (  # noqa: F401
    BATCH, EARLIEST, INT32_MAX, LATEST, READ, READ_WRITE, STREAM, WRITE, ByMode, Forbidden,
    Option, boolean, choice, closest, duration_ms, fields_of, integer, kafka_params,
    lower_keys, parse_bool, parse_duration_ms, parse_int, parse_json, text,
)
from .names import SPARK_INJECTED, STRICT, STRICT_ENV, strictness  # noqa: F401
from .offset_spec import OffsetSpec, check_offset_consistency, parse_offset_spec  # noqa: F401
from .read import ReadOptions, parse_read_options  # noqa: F401
from .read_declarations import READ_OPTIONS  # noqa: F401
from .readme import (  # noqa: F401
    README_BEGIN, README_END, forbidden_markdown, main, options_markdown, readme_section,
)
from .registry import (  # noqa: F401
    BY_NAME, FORBIDDEN, OPTIONS, check_kafka_settings, check_option_names, declared_values,
    default_of, unknown_option_names, warn_ignored,
)
from .subscription import Subscription, parse_subscription  # noqa: F401
from .write import MAX_RETRIES, WriteOptions, parse_write_options  # noqa: F401
from .write_declarations import WRITE_OPTIONS  # noqa: F401
