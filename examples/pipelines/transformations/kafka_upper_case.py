"""Definitions of the example pipeline (spark-pipeline.yml).

``events_raw``: a streaming table fed by ``format("pykafka")`` from the input topic.
``upper_case_to_kafka``: an append flow from that table into the ``kafka_out`` sink, which
writes each record back to the output topic with its key and its value upper-cased.

``spark`` is put into this module by ``spark-pipelines``. No register call is needed: the
Spark Connect server's Python workers find the ``pykafka`` format through the installed
``pyspark_pykafka`` module (kafka_ds must be installed in the Python that ``PYSPARK_PYTHON``
names).
"""
from pyspark import pipelines as dp
from pyspark.sql import functions as F

# The spec's ``configuration`` entries are Spark confs of the pipeline's session.
BOOTSTRAP_SERVERS = spark.conf.get("kafka_ds.example.bootstrapServers")  # noqa: F821
INPUT_TOPIC = spark.conf.get("kafka_ds.example.inputTopic")  # noqa: F821
OUTPUT_TOPIC = spark.conf.get("kafka_ds.example.outputTopic")  # noqa: F821


@dp.table(comment="Records of the input topic, as kafka_ds reads them.")
def events_raw():
    return (spark.readStream.format("pykafka")  # noqa: F821
            .option("kafka.bootstrap.servers", BOOTSTRAP_SERVERS)
            .option("subscribe", INPUT_TOPIC)
            .option("startingOffsets", "earliest")
            .load())


dp.create_sink("kafka_out", format="pykafka",
               options={"kafka.bootstrap.servers": BOOTSTRAP_SERVERS, "topic": OUTPUT_TOPIC})


@dp.append_flow(target="kafka_out")
def upper_case_to_kafka():
    return (spark.readStream.table("events_raw")  # noqa: F821
            .select("key", F.upper(F.col("value").cast("string")).alias("value")))
