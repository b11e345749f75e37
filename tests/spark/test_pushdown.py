"""Filter pushdown (option pushFilters + Spark's spark.sql.python.filterPushdown.enabled):
the filtered read equals the unfiltered read filtered by Spark, and reads less."""
import datetime as dt
import re
import uuid

import pytest
from chispa import assert_df_equality

from kafka_ds.options import parse_read_options
from kafka_ds.compat import PUSHDOWN_CONF
from kafka_ds.read.pushdown import Narrowing, narrow
from kafka_ds.read.planner import OffsetPlanner
from kafka_ds.client import make_client
from tests.support.brokers import produce_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)

pytest.importorskip("pyspark.sql.datasource", minversion=None)
from pyspark.sql.datasource import (  # noqa: E402
    EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, LessThan, LessThanOrEqual, Not,
)

BASE_TS = 1_700_000_000_000
COUNTS = {("a", 0): 20, ("a", 1): 15, ("a", 2): 25, ("b", 0): 10}


def utc(ms):
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


# --- the translation of filters ---------------------------------------------------------------

def test_exact_filters_are_taken_and_timestamps_go_back_to_spark():
    filters = [EqualTo(("topic",), "t1"), In(("partition",), (0, 2, 5)),
               GreaterThan(("partition",), 0), GreaterThanOrEqual(("offset",), 3),
               LessThan(("offset",), 40), LessThanOrEqual(("offset",), 30),
               GreaterThan(("timestamp",), utc(BASE_TS + 1000) + dt.timedelta(microseconds=1)),
               LessThanOrEqual(("timestamp",), utc(BASE_TS + 9000)),
               IsNotNull(("key",)), Not(EqualTo(("partition",), 2)), EqualTo(("offset",), "x")]
    narrowing, back = narrow(filters)
    assert back == filters[6:]
    assert narrowing == Narrowing(
        topics=frozenset({"t1"}), partitions=frozenset({0, 2, 5}), partition_low=1,
        offset_low=3, offset_high=31, timestamp_low=BASE_TS + 1001, timestamp_high=BASE_TS + 9001)
    assert narrowing.keeps("t1", 2) and not narrowing.keeps("t1", 0) \
        and not narrowing.keeps("t2", 2)


def test_comparisons_combine_and_timestamps_are_whole_milliseconds():
    narrowing, back = narrow([
        In(("topic",), ("x", "y")), EqualTo(("topic",), "y"), EqualTo(("partition",), 3),
        LessThan(("partition",), 9), EqualTo(("offset",), 7), GreaterThan(("offset",), 2),
        GreaterThanOrEqual(("timestamp",), utc(BASE_TS) + dt.timedelta(microseconds=1)),
        LessThan(("timestamp",), utc(BASE_TS + 5)), LessThan(("timestamp",), utc(BASE_TS + 7))])
    assert narrowing == Narrowing(topics=frozenset({"y"}), partition_low=3, partition_high=4,
                                  offset_low=7, offset_high=8, timestamp_low=BASE_TS + 1,
                                  timestamp_high=BASE_TS + 5)
    assert len(back) == 3


# --- on the brokers -------------------------------------------------------------------------

class Data:
    def __init__(self, broker):
        self.broker = broker
        stem = f"pd{uuid.uuid4().hex[:8]}"
        self.topics = {"a": f"{stem}-a", "b": f"{stem}-b"}
        self.pattern = f"{stem}-.*"
        broker.create_topic(self.topics["a"], partitions=3)
        broker.create_topic(self.topics["b"], partitions=1)
        for (short, partition), count in COUNTS.items():
            records = [{"key": None if i % 3 == 0 else f"k{i}".encode(), "value": b"v" * i,
                        "timestamp_ms": BASE_TS + i * 1000} for i in range(count)]
            produce_confluent(broker.bootstrap_servers, self.topics[short], records,
                              partition=partition, **{"batch.num.messages": 4, "linger.ms": 100})

    def read(self, spark, push):
        return (spark.read.format("pykafka")
                .option("kafka.bootstrap.servers", self.broker.bootstrap_servers)
                .option("subscribePattern", self.pattern)
                .option("pushFilters", "true" if push else "false").load())


@pytest.fixture(scope="module", params=["mock", "tansu"])
def data(request, _brokers):
    return Data(_brokers.get(request.param))


@pytest.fixture
def pushdown_conf(spark):
    spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        yield
    finally:
        spark.conf.unset(PUSHDOWN_CONF)


def test_filtered_read_equals_spark_filter(spark, data, pushdown_conf):
    b = data.topics["b"]
    since, until = utc(BASE_TS + 6_000).isoformat(), utc(BASE_TS + 12_500).isoformat()
    for where in [
        f"partition IN (0, 2) AND offset >= 5 AND offset < 12 AND topic != '{b}'",
        f"timestamp BETWEEN '{since}' AND '{until}' AND partition > 0 AND key IS NOT NULL",
    ]:
        order = ["topic", "partition", "offset"]
        assert_df_equality(data.read(spark, True).where(where).orderBy(order),
                           data.read(spark, False).where(where).orderBy(order),
                           ignore_nullable=True)


def test_pushed_filters_plan_narrow_ranges(data):
    a, b = data.topics["a"], data.topics["b"]
    from kafka_ds.reader import KafkaPushdownReader
    opts = parse_read_options({"kafka.bootstrap.servers": data.broker.bootstrap_servers,
                               "subscribePattern": data.pattern, "pushFilters": "true"},
                              streaming=False)
    reader = KafkaPushdownReader(opts)
    filters = [In(("topic",), (a,)), GreaterThanOrEqual(("partition",), 1),
               GreaterThanOrEqual(("timestamp",), utc(BASE_TS + 9_000)),
               LessThan(("offset",), 14)]
    assert list(reader.pushFilters(filters)) == [filters[2]]
    planned = sorted((p.topic, p.partition, p.start, p.end, p.late_start, p.late_end)
                     for p in reader.partitions())
    assert planned == [(a, 1, 9, 14, False, False), (a, 2, 9, 14, False, False)]
    assert b not in {p[0] for p in planned}
    client = make_client(opts)
    try:   # the same ranges an explicit timestamp option plans, cut at the offset bound
        assert OffsetPlanner(opts, client).offsets_for_times(
            {(a, 1): BASE_TS + 9_000}) == {(a, 1): (9, -1)}
    finally:
        client.close()


@pytest.fixture(scope="module")
def tansu_data(_brokers):
    return Data(_brokers.get("tansu"))


@pytest.mark.parametrize("conf", [False, True], ids=["conf-off", "conf-on"])
@pytest.mark.parametrize("option", [None, "false", "true"], ids=["unset", "false", "true"])
def test_each_setting_of_option_and_conf_reads_or_fails_naming_both(spark, tansu_data,
                                                                     conf, option):
    """Spark's conf turned on for other sources never breaks a read that does not ask for
    pushdown; asking for it without the conf fails with a message naming both settings."""
    if conf:
        spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        reader = (spark.read.format("pykafka")
                  .option("kafka.bootstrap.servers", tansu_data.broker.bootstrap_servers)
                  .option("subscribePattern", tansu_data.pattern))
        if option is not None:
            reader = reader.option("pushFilters", option)
        df = reader.load().where("partition = 0 AND offset < 3")
        if option == "true" and not conf:
            with pytest.raises(Exception) as info:
                df.collect()
            message = str(info.value)
            assert "option 'pushFilters'=true" in message, message
            assert "'spark.sql.python.filterPushdown.enabled' is false" in message, message
            return
        assert df.count() == 6      # offsets 0-2 of a-0 and of b-0
        # Filters the source took exactly are gone from Spark's Filter node.
        plan = df._jdf.queryExecution().executedPlan().toString()
        spark_filters_partition = re.search(r"\(partition#\d+ = 0\)", plan) is not None
        assert spark_filters_partition == (option != "true"), plan
    finally:
        if conf:
            spark.conf.unset(PUSHDOWN_CONF)
