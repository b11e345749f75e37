"""What kafka_ds does in a Spark Python worker process beyond the work itself.

:func:`freeze_long_lived_objects`, once per process: PySpark's daemon forks a worker that
runs task after task (``spark.python.worker.reuse``) and calls ``gc.collect()`` after each
one. A full collection walks every tracked object of the process: pyspark, pyarrow, numpy
and kafka_ds modules, their functions and classes, a walk as long as a small read task
itself. None of those objects becomes garbage while the process lives, so after the first
task's imports they are collected once and moved to the permanent generation
(``gc.freeze``); later collections walk only what the tasks allocate.

:func:`spark_entry_point`, on every method Spark calls: Spark shows a Python worker's error
with its whole traceback, the message last. A kafka_ds error already says what failed and
the fix, so it leaves with the traceback of the entry point alone (the full one is logged
at DEBUG), and the message is a few lines from the top of what the user sees.
"""

from __future__ import annotations

import functools
import gc
import inspect
import logging

from .errors import KafkaError

log = logging.getLogger(__name__)

_frozen = False


def freeze_long_lived_objects() -> None:
    """Collect once, then exclude everything alive now from later collections."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()
    gc.freeze()


def _shortened(exc: KafkaError) -> KafkaError:
    log.debug("%s: %s", type(exc).__name__, exc, exc_info=exc)
    return exc.with_traceback(None)


def spark_entry_point(method):
    """Decorate a method Spark calls (a generator too): kafka_ds errors leave it with a
    traceback of this frame only, their cause logged at DEBUG instead of chained."""
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator(*args, **kwargs):
            try:
                yield from method(*args, **kwargs)
            except KafkaError as exc:
                raise _shortened(exc) from None

        return generator

    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except KafkaError as exc:
            raise _shortened(exc) from None

    return call
