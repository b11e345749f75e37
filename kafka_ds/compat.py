"""What each pyspark 4.x offers Python data sources, in one place.

The Python Data Source API exists from pyspark 4.0; later releases added to it:

* 4.1: ``DataSourceStreamArrowWriter`` (streaming writes get Arrow batches; the pykafka
  streaming sink is built on it) and filter pushdown for Python data sources (the filter
  classes; Spark's conf :data:`PUSHDOWN_CONF` turns it on).
* 4.2: admission control for streaming reads (``pyspark.sql.streaming.datasource``:
  ``ReadLimit``s, ``SupportsTriggerAvailableNow``; ``latestOffset(start, limit)``), which
  ``maxOffsetsPerTrigger``/``minOffsetsPerTrigger``/``maxTriggerDelay`` need.

Everything else works on every 4.x. A feature this pyspark lacks fails at planning with a
message naming the release that has it (``require``).
"""

from __future__ import annotations

import pyspark

from .errors import ConfigurationError

try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pyspark 4.0
    DataSourceStreamArrowWriter = None  # type: ignore[misc,assignment]

#: Spark's conf that lets a Python data source's reader take filters (pyspark >= 4.1)
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
try:
    from pyspark.sql.datasource import (  # noqa: F401
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )

    FILTER_PUSHDOWN = True
except ImportError:  # pyspark 4.0
    FILTER_PUSHDOWN = False

    class _NoFilter:
        """Stand-in for pyspark 4.1's filter classes: nothing is an instance of it (and
        ``pushFilters=true`` fails with ``require`` before any filter arrives)."""

    EqualTo = GreaterThan = GreaterThanOrEqual = In = LessThan = LessThanOrEqual = _NoFilter  # type: ignore[misc,assignment]

try:
    from pyspark.sql.streaming.datasource import (  # noqa: F401
        ReadAllAvailable,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ImportError:  # pyspark < 4.2
    ADMISSION_CONTROL = False
    ReadAllAvailable = ReadMaxRows = ReadMinRows = None  # type: ignore[misc,assignment]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in base class: pyspark < 4.2 has no admission control."""


def require(available: bool, what: str, release: str) -> None:
    """Fail with a clear message when ``what`` needs pyspark ``release`` or later."""
    if not available:
        raise ConfigurationError(
            f"{what} needs pyspark >= {release} (the Python Data Source API of earlier "
            f"releases lacks it); this is pyspark {pyspark.__version__}. Upgrade pyspark, or "
            "leave the option out."
        )
