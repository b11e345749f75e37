"""Once per Spark Python worker process: keep the long-lived objects out of the collector.

PySpark's daemon forks a worker that runs task after task (``spark.python.worker.reuse``)
and calls ``gc.collect()`` after each one. A full collection walks every tracked object of
the process: pyspark, pyarrow, numpy and kafka_ds modules, their functions and classes,
a walk as long as a small read task itself. None of those objects becomes garbage while
the process lives, so after the first task's imports they are collected once and moved
to the permanent generation (``gc.freeze``); later collections walk only what the tasks
allocate.
"""
from __future__ import annotations

import gc

_frozen = False


def freeze_long_lived_objects() -> None:
    """Collect once, then exclude everything alive now from later collections."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()
    gc.freeze()
