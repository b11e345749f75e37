"""Filter pushdown (option pushFilters + Spark's spark.sql.python.filterPushdown.enabled):
the filtered read equals the unfiltered read filtered by Spark, and reads less."""

import re

import pytest
from chispa import assert_df_equality

from kafka_ds.compat import PUSHDOWN_CONF
from tests.support.spark_support import spark  # noqa: F401  (fixture)

pytest.importorskip("pyspark.sql.datasource", minversion=None)
from tests.integration.test_pushdown import (
    Data,  # noqa: E402
    data,  # noqa: E402, F401  (fixture)
)
from tests.unit.test_pushdown import BASE_TS, utc  # noqa: E402

# --- on the brokers -------------------------------------------------------------------------


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
        assert_df_equality(
            data.read(spark, True).where(where).orderBy(order),
            data.read(spark, False).where(where).orderBy(order),
            ignore_nullable=True,
        )


@pytest.fixture(scope="module")
def kafka_data(_brokers):
    return Data(_brokers.get("kafka"))


@pytest.mark.parametrize("conf", [False, True], ids=["conf-off", "conf-on"])
@pytest.mark.parametrize("option", [None, "false", "true"], ids=["unset", "false", "true"])
def test_each_setting_of_option_and_conf_reads_or_fails_naming_both(
    spark, kafka_data, conf, option
):
    """Spark's conf turned on for other sources never breaks a read that does not ask for
    pushdown; asking for it without the conf fails with a message naming both settings."""
    if conf:
        spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        reader = (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", kafka_data.broker.bootstrap_servers)
            .option("subscribePattern", kafka_data.pattern)
        )
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
        assert df.count() == 6  # offsets 0-2 of a-0 and of b-0
        # Filters the source took exactly are gone from Spark's Filter node.
        plan = df._jdf.queryExecution().executedPlan().toString()
        spark_filters_partition = re.search(r"\(partition#\d+ = 0\)", plan) is not None
        assert spark_filters_partition == (option != "true"), plan
    finally:
        if conf:
            spark.conf.unset(PUSHDOWN_CONF)
