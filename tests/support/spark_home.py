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

The home's ``jars`` is not the venv's folder but a copy of it (hard links where the file
system allows) under ``~/.cache/kafka_ds-tests/``, named by the pyspark release and its jars'
names and sizes, every jar dated 2000-01-01 (``stable_jars``). A JVM maps a class-data
archive (tests/support/jvm_options.py) only if every jar on its class path has the path
(resolved), size and time it had when the archive was made; the jars of a venv installed
again (each new clone, each CI run) have new times. With the copy, a new venv of the same
pyspark finds the same jars, and the archive a previous run made for them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile

# The time every jar of ``stable_jars`` gets: 2000-01-01.
JARS_MTIME = 946_684_800


def cache_root() -> str:
    """Where the suite keeps what outlives a run and a checkout (created on first use)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = os.path.join(base, "kafka_ds-tests")
    os.makedirs(root, exist_ok=True)
    return root


def stable_jars(jars: str, version: str) -> str:
    """The folder of Spark's jars for the jars at ``jars`` (a pyspark's ``jars`` folder):
    named by the release and the jars' names and sizes, made once, every file dated
    ``JARS_MTIME``."""
    names = sorted(os.listdir(jars))
    identity = [(name, os.path.getsize(os.path.join(jars, name))) for name in names]
    digest = hashlib.sha1(f"{version}|{identity}".encode()).hexdigest()[:12]
    root = cache_root()
    target = os.path.join(root, f"spark-jars-{version}-{digest}")
    if os.path.isdir(target):
        return target
    partial = tempfile.mkdtemp(prefix=os.path.basename(target) + ".", dir=root)
    os.chmod(partial, 0o755)
    for name in names:
        source, copy = os.path.join(jars, name), os.path.join(partial, name)
        if os.path.isdir(source):  # connect-repl/: Spark Connect's shell
            shutil.copytree(source, copy, copy_function=_link_or_copy)
        else:
            _link_or_copy(source, copy)
    for folder, _dirs, files in os.walk(partial):
        for name in files:
            os.utime(os.path.join(folder, name), (JARS_MTIME, JARS_MTIME))
    try:
        os.rename(partial, target)  # atomic: parallel workers never see a half-made folder
    except OSError:  # another process made it first
        shutil.rmtree(partial, ignore_errors=True)
    return target


def _link_or_copy(source: str, copy: str) -> None:
    try:
        os.link(source, copy)  # (the venv's file gets the date too: it is the same file)
    except OSError:  # another file system
        shutil.copyfile(source, copy)


def linked_home(installed: str, version: str) -> str:
    """The linked home of the pyspark installed at ``installed`` (its package folder), made
    on first use."""
    # (v2: ``jars`` links to ``stable_jars``; homes made before link to the venv's own)
    key = hashlib.sha1(f"v2|{installed}|{version}".encode()).hexdigest()[:12]
    home = os.path.join(tempfile.gettempdir(), f"kafka_ds-tests-spark-home-{key}")
    if not os.path.isdir(home):
        partial = tempfile.mkdtemp(prefix=os.path.basename(home) + ".", dir=tempfile.gettempdir())
        for name in os.listdir(installed):
            if name == "jars":
                target = stable_jars(os.path.join(installed, name), version)
            elif name != "python":
                target = os.path.join(installed, name)
            else:
                continue
            os.symlink(target, os.path.join(partial, name))
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
