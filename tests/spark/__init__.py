"""Tests that run Spark: the suite's local session, or Spark drivers, clusters and venvs of
their own."""
