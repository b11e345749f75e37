"""The read path behind ``reader.py`` and ``stream.py``: the driver's offset planning
(``planner.py``, ``stream_offsets.py``, ``pushdown.py``), a task's range read
(``ranges.py``, ``fetch_pipeline.py``, ``record_timestamps.py``), typed keys and values
(``typed_columns.py``) and a stream's consumer-group commits (``group_commits.py``)."""
