"""The habits of a maintained project hold: ruff finds nothing (lint rules and format, as
configured in pyproject.toml), mypy reports no error on kafka_ds and on the test support
code (tests/support), and the package ships its types (py.typed). ``scripts/check`` runs the
same checks outside the suite."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: what ruff checks: the package, the tests, the benchmarks and the docs generator
LINTED = ["kafka_ds", "pyspark_pykafka", "tests", "benchmarks", "docs/generate.py"]


def run(*args):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize(
    "command", [["check"], ["format", "--check"]], ids=["ruff check", "ruff format --check"]
)
def test_ruff_finds_nothing(command):
    done = run("ruff", *command, *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr


#: mypy's cache outside the checkout: a new clone (as CI's) checks the files it already
#: checked in 1 s instead of 19 s (mypy takes a cached module whose hash is unchanged)
MYPY_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "kafka_ds-tests", "mypy")


def test_mypy_reports_no_error():
    # files and options: [tool.mypy] in pyproject.toml
    done = run("mypy", "--cache-dir", MYPY_CACHE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_package_ships_its_types():
    assert os.path.isfile(os.path.join(ROOT, "kafka_ds", "py.typed"))
