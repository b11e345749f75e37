"""The write path behind ``writer.py``: the driver's checks (``plan.py``, ``topics.py``,
``typed_writes.py``), a task's write (``task.py``: ``rows.py`` per Arrow batch,
``partitioner.py``, ``buffers.py`` per partition) and exactly-once commits
(``exactly_once.py``)."""
