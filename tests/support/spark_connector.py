"""Spark's own Kafka connector (``format("kafka")``) from Maven Central, and a pyspark to run it.

The connector is not part of pyspark. ``tests/support/maven/spark-kafka/pom.xml`` names
``org.apache.spark:spark-sql-kafka-0-10_2.13`` (and spark-avro, for benchmarks/bench_jvm.py);
``mvn dependency:build-classpath`` resolves it into Maven's own cache (``~/.m2``) and the jars
that go on ``spark.jars`` are kept in ``.venv-kafka/spark-connector-<pyspark>.json``, so a
later run resolves nothing. Which release: the test venv's pyspark if Maven Central serves
the connector for it, else the newest release it serves below it (read from the artifact's
maven-metadata.xml; in November 2026 it serves 4.2.0 but not 4.3.0, the test venv's). A
connector runs in a Spark of its own minor line: when that is not the test venv's, it runs
in the version tests' release of that line (``.venv-spark/4.2.1`` for the 4.2.0 connector,
tests/support/spark_venvs.py: a patch release keeps the interfaces the connector uses, and
one install serves both modules).

    python -m tests.support.spark_connector     # resolves, prints {version, jars, python}
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.support import spark_home, spark_venvs
from tests.support.apache_kafka import CACHE_DIR, _locked

POM = Path(__file__).resolve().with_name("maven") / "spark-kafka" / "pom.xml"
# What goes on spark.jars: the connector and what it needs beyond Spark's own jars.
CONNECTOR_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
)
AVRO_ARTIFACT = "spark-avro_2.13"


class ConnectorError(RuntimeError):
    pass


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def _mvn() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConnectorError(
            "Spark's Kafka connector comes from Maven Central through Maven: "
            "install it (apt-get install maven) and put `mvn` on PATH"
        )
    return mvn


def _build_classpath(spec: str, output: Path) -> subprocess.CompletedProcess:
    artifacts = ",".join(CONNECTOR_ARTIFACTS + (AVRO_ARTIFACT,))
    return subprocess.run(
        [
            _mvn(),
            "-q",
            "-B",
            "-f",
            str(POM),
            f"-Dspark.version={spec}",
            "dependency:build-classpath",
            f"-DincludeArtifactIds={artifacts}",
            f"-Dmdep.outputFile={output}",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )


METADATA = (
    "https://repo1.maven.org/maven2/org/apache/spark/spark-sql-kafka-0-10_2.13/maven-metadata.xml"
)
# The newest release Maven Central served below 4.3.0 when this was written: the answer when
# its list cannot be read.
KNOWN_SERVED = "4.2.0"


def _release(version: str) -> tuple[int, ...] | None:
    parts = version.split(".")
    return tuple(map(int, parts)) if all(p.isdigit() for p in parts) else None


def newest_served(wanted: str) -> str:
    """The newest release (no preview) of the connector on Maven Central up to ``wanted``,
    from the artifact's maven-metadata.xml (the list Maven itself reads for version ranges)."""
    import urllib.request
    import xml.etree.ElementTree as ET

    try:
        with urllib.request.urlopen(METADATA, timeout=30) as answer:
            versions = [v.text or "" for v in ET.fromstring(answer.read()).iter("version")]
    except Exception as exc:  # noqa: BLE001 -- offline: the last release known to be served
        print(f"cannot read {METADATA} ({exc}); trying {KNOWN_SERVED}", file=sys.stderr)
        return KNOWN_SERVED
    limit = _release(wanted)
    served = {}
    for version in versions:
        release = _release(version)
        if release is not None and (limit is None or release <= limit):
            served[version] = release
    return max(served, key=served.__getitem__) if served else KNOWN_SERVED


def resolve(pyspark_version: str | None = None) -> dict:
    """``{"version", "jars": [connector jars], "avro_jar"}`` for the test venv's pyspark (or
    ``pyspark_version``): that release's connector if Maven Central serves it, else the newest
    release below it that it serves. Cached under ``.venv-kafka/``."""
    wanted = pyspark_version or os.environ.get("KAFKA_DS_SPARK_CONNECTOR") or _pyspark_version()
    target = CACHE_DIR / f"spark-connector-{wanted}.json"
    with _locked(CACHE_DIR / "spark-connector.lock"):
        if target.exists():
            found = json.loads(target.read_text())
            if all(os.path.exists(jar) for jar in found["jars"] + [found["avro_jar"]]):
                return found
        started = time.monotonic()
        partial = target.with_suffix(".partial")
        tried = []
        for spec in dict.fromkeys((wanted, newest_served(wanted))):
            run = _build_classpath(spec, partial)
            tried.append(f"{spec}: rc={run.returncode} {run.stdout[-1500:]}{run.stderr[-1500:]}")
            if run.returncode == 0 and partial.exists():
                break
        else:
            raise ConnectorError(
                "mvn could not resolve org.apache.spark:spark-sql-kafka-0-10_2.13 "
                f"for pyspark {wanted}:\n" + "\n".join(tried)
            )
        jars = partial.read_text().strip().split(os.pathsep)
        partial.unlink()
        by_artifact = {}
        for jar in jars:
            name = os.path.basename(jar)
            for artifact in CONNECTOR_ARTIFACTS + (AVRO_ARTIFACT,):
                if name.startswith(artifact + "-") and name[len(artifact) + 1 :][:1].isdigit():
                    by_artifact[artifact] = jar
        missing = [a for a in CONNECTOR_ARTIFACTS + (AVRO_ARTIFACT,) if a not in by_artifact]
        if missing:
            raise ConnectorError(f"mvn's classpath lacks {missing}: {jars}")
        connector = os.path.basename(by_artifact[CONNECTOR_ARTIFACTS[0]])
        version = connector[len(CONNECTOR_ARTIFACTS[0]) + 1 : -len(".jar")]
        found = {
            "version": version,
            "pyspark": wanted,
            "jars": [by_artifact[a] for a in CONNECTOR_ARTIFACTS],
            "avro_jar": by_artifact[AVRO_ARTIFACT],
            "kafka_clients": os.path.basename(by_artifact["kafka-clients"])[
                len("kafka-clients-") : -len(".jar")
            ],
        }
        target.write_text(json.dumps(found, indent=1))
        print(
            f"resolved Spark's Kafka connector {version} (for pyspark {wanted}) from Maven "
            f"Central in {time.monotonic() - started:.0f} s",
            file=sys.stderr,
        )
        return found


def spark_python(version: str) -> str:
    """A Python whose pyspark runs the connector of ``version``: the test venv's own when it
    has that release, else the version tests' release of its minor line in
    ``.venv-spark/`` (tests/support/spark_venvs.py: 4.2.1 for the 4.2.0 connector, one
    install for both modules)."""
    if version == _pyspark_version():
        return sys.executable
    release = spark_venvs.release_for(version)
    python, _seconds, error = spark_venvs.install([release])[release]
    if error:
        raise ConnectorError(f"installing pyspark=={release} failed:\n{error}")
    return str(python)


def child_environment(python: str | None = None) -> dict:
    """The environment of a Spark driver in another pyspark's venv: not the suite's Spark home
    (tests/support/spark_home.py, the test venv's pyspark) but, given the venv's ``python``,
    the linked home of that venv's pyspark, so that its Python workers import pyspark from
    the venv and not from ``pyspark.zip``. The suite's JVM options stay (a JVM whose class
    path is not the class archive's ignores the archive)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
    }
    if python is not None:
        env["SPARK_HOME"] = spark_home.home_for_python(python)
        # uv leaves a release's pyspark uncompiled (tests/support/spark_venvs.py): the first
        # process that imports a module writes its bytecode into the venv, the rest read it
        # (with PYTHONDONTWRITEBYTECODE, set on the machines here, every Python worker of
        # the job compiled the pyspark modules it imports again)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


if __name__ == "__main__":
    found = resolve()
    found["python"] = spark_python(found["version"])
    print(json.dumps(found, indent=1))
