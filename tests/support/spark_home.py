"""A Spark home for the suite's JVMs without ``python/lib/pyspark.zip`` on the workers' path.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's
``PYTHONPATH``, ahead of the venv's site-packages, where pip installed the same pyspark with
compiled bytecode. Imports from a zip are compiled again in each process, and each task's
``importlib.invalidate_caches()`` (pyspark's ``setup_spark_files``) re-reads the zip's
directory. Profiled on the suite, that was about half of the Python workers' CPU: every
data-source planning step runs in a fresh fork that imports its pyspark module.

This home links everything of the pip pyspark except ``python/``, so the path Spark adds
names no file and the workers import pyspark from site-packages, the same code. Created once
per pyspark installation in the temp folder. A Spark job started with another pyspark (the
venvs of tests/spark/test_spark_versions.py, the parity module's driver) gets that
pyspark's own linked home (``home_for_python``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile


def linked_home(installed: str, version: str) -> str:
    """The linked home of the pyspark installed at ``installed`` (its package folder), made
    on first use."""
    key = hashlib.sha1(f"{installed}|{version}".encode()).hexdigest()[:12]
    home = os.path.join(tempfile.gettempdir(), f"kafka_ds-tests-spark-home-{key}")
    if not os.path.isdir(home):
        partial = tempfile.mkdtemp(prefix=os.path.basename(home) + ".", dir=tempfile.gettempdir())
        for name in os.listdir(installed):
            if name != "python":
                os.symlink(os.path.join(installed, name), os.path.join(partial, name))
        try:
            os.rename(partial, home)  # atomic: parallel workers never see a half-made home
        except OSError:  # another process made it first
            for name in os.listdir(partial):
                os.unlink(os.path.join(partial, name))
            os.rmdir(partial)
    return home


def home_for_python(python: str) -> str:
    """The linked home of the pyspark that ``python`` (another venv's) imports: for a Spark
    job on another pyspark release, whose Python workers would otherwise import that
    pyspark from its zip too."""
    found = subprocess.run(
        [
            python,
            "-c",
            "import os, pyspark; print(os.path.dirname(pyspark.__file__)); "
            "print(pyspark.__version__)",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    return linked_home(found[0], found[1])


def install() -> str | None:
    """Point ``SPARK_HOME`` of this process and its children at the linked home, unless it
    is set already. The home's path, or None."""
    if "SPARK_HOME" in os.environ:
        return None
    import pyspark

    real = os.path.dirname(os.path.abspath(pyspark.__file__))
    os.environ["SPARK_HOME"] = home = linked_home(real, pyspark.__version__)
    return home
