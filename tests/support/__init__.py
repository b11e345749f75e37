"""What the tests use besides the code under test: the brokers the suite starts, the fake
servers and proxies, the Spark session and the child processes (tests/README.md says what
each one proves)."""

from pathlib import Path

# The checkout: ``python -m tests.support.<child>`` run here finds this package (and the
# checkout's kafka_ds) first on its path.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
