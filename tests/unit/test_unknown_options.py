"""A mistyped option must not pass silently: unknown option names are named with the
closest known ones (a warning, or with strictOptions a ConfigurationError at planning), and
a wrong enumerated value names the allowed values and the closest one.

What a user sees of it in Spark: tests/spark/test_unknown_options.py.
"""

import logging

import pytest

from kafka_ds.errors import ConfigurationError
from kafka_ds.options import check_option_names, parse_read_options, parse_write_options
from kafka_ds.options.core import WRITE
from kafka_ds.options.names import STRICT_ENV
from kafka_ds.options.registry import BY_NAME, OPTIONS, unknown_option_names

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
READ_BASE = {**BS, "subscribe": "t"}

# The misspellings and the name each must suggest.
TYPOS = [
    ("startingOffset", "startingOffsets"),
    ("endingOffset", "endingOffsets"),
    ("failOnDataLos", "failOnDataLoss"),
    ("maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
    ("bootstrap.servers", "kafka.bootstrap.servers"),
    ("deliveryGuarantees", "deliveryGuarantee"),
]


@pytest.fixture(autouse=True)
def _no_strict_env(monkeypatch):
    monkeypatch.delenv(STRICT_ENV, raising=False)


def warnings_of(caplog):
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "kafka_ds.options" and "is not a pykafka option" in r.getMessage()
    ]


@pytest.mark.parametrize("typo, meant", TYPOS)
def test_unknown_name_warns_with_the_closest_known_name(typo, meant, caplog):
    with caplog.at_level(logging.WARNING, logger="kafka_ds.options"):
        if meant == "deliveryGuarantee":
            parse_write_options({**BS, typo: "exactly-once"})
        else:
            parse_read_options({**READ_BASE, typo: "1"}, streaming=meant != "endingOffsets")
    [message] = warnings_of(caplog)
    # Spark hands the names over lower-cased.
    assert message.startswith(
        f"Option '{typo.lower()}' is not a pykafka option; did you mean '{meant}'? It is ignored"
    )
    assert '.option("strictOptions", "true")' in message


def test_a_name_close_to_nothing_is_named_without_a_guess(caplog):
    with caplog.at_level(logging.WARNING, logger="kafka_ds.options"):
        parse_read_options({**READ_BASE, "frobnicate": "1"}, streaming=False)
    [message] = warnings_of(caplog)
    assert message.startswith("Option 'frobnicate' is not a pykafka option. It is ignored")


@pytest.mark.parametrize("how", ["option", "env"])
@pytest.mark.parametrize("mode", ["batch", "stream", "write"])
def test_strict_options_fail_planning_naming_the_option_and_the_fix(how, mode, monkeypatch):
    options = {**BS} if mode == "write" else {**READ_BASE}
    options["startingOffset"] = "earliest"
    if how == "option":
        options["STRICTOPTIONS"] = "True"  # any case, like every option
    else:
        monkeypatch.setenv(STRICT_ENV, "true")
    with pytest.raises(ConfigurationError) as info:
        if mode == "write":
            parse_write_options(options)
        else:
            parse_read_options(options, streaming=mode == "stream")
    message = str(info.value)
    assert (
        "Option 'startingoffset' is not a pykafka option; did you mean 'startingOffsets'?"
        in message
    )
    assert (
        "option 'strictOptions' is true"
        if how == "option"
        else f"environment variable {STRICT_ENV} is true"
    ) in message
    assert "correct the name" in message


def test_strict_option_false_wins_over_the_environment(monkeypatch, caplog):
    monkeypatch.setenv(STRICT_ENV, "true")
    with caplog.at_level(logging.WARNING, logger="kafka_ds.options"):
        parse_read_options(
            {**READ_BASE, "startingOffset": "earliest", "strictOptions": "false"}, streaming=True
        )
    assert len(warnings_of(caplog)) == 1


def test_a_wrong_strictness_is_itself_an_error(monkeypatch):
    with pytest.raises(
        ConfigurationError,
        match="Option 'strictOptions' must be 'true' or 'false', got 'ture'; did you mean 'true'",
    ):
        check_option_names({"strictoptions": "ture"})
    monkeypatch.setenv(STRICT_ENV, "yes")
    with pytest.raises(ConfigurationError, match=f"Environment variable {STRICT_ENV} must be"):
        check_option_names({})


def test_known_names_are_not_reported(caplog):
    """Every declaration (in any case, of any mode: those of another mode are 'ignored'
    instead), kafka.* settings, and what Spark adds (path, checkpointLocation, queryName)."""
    every = {o.name.upper(): "x" for o in OPTIONS}
    assert unknown_option_names({k.lower(): v for k, v in every.items()}) == []
    spark_added = {
        "path": "/p",
        "checkpointlocation": "/c",
        "queryname": "q",
        "kafka.session.timeout.ms": "1",
    }
    assert unknown_option_names(spark_added) == []
    with caplog.at_level(logging.WARNING, logger="kafka_ds.options"):
        parse_read_options(
            {
                **READ_BASE,
                **spark_added,
                "STRICTOPTIONS": "true",
                "maxOffsetsPerTrigger": "5",
                "topic": "x",
            },
            streaming=False,
        )
        parse_write_options(
            {
                **BS,
                "path": "/p",
                "checkpointLocation": "/c",
                "queryName": "q",
                "strictOptions": "true",
                "subscribe": "t",
            }
        )
    assert warnings_of(caplog) == []
    assert "maxOffsetsPerTrigger option ignored in batch queries" in caplog.text
    assert "subscribe option ignored in writes" in caplog.text


def test_strict_options_is_declared_for_every_query():
    option = BY_NAME["strictoptions"]
    assert option.markdown_applies() == "read, write" and option.default is False


# --- values: every enumerated declaration, derived from the registry ---------------------

ENUMERATED = [o for o in OPTIONS if getattr(o.parse, "choices", None)]


def _near_miss(value: str) -> str:
    return value[:1] + "x" + value[1:]  # 'latest' -> 'lxatest', '0' -> '0x'


def test_the_enumerated_declarations_are_found():
    names = {o.name for o in ENUMERATED}
    assert {
        "startingOffsetsByTimestampStrategy",
        "deliveryGuarantee",
        "latestOffsetsVia",
        "startingOffsetsFallback",
        "kafka.isolation.level",
        "kafka.acks",
        "kafka.compression.type",
        "failOnDataLoss",
        "strictOptions",
    } <= names


@pytest.mark.parametrize("option", ENUMERATED, ids=[o.name for o in ENUMERATED])
def test_a_wrong_enumerated_value_names_the_allowed_values_and_the_closest(option):
    for value in option.parse.choices:
        options = {option.name: _near_miss(value)}
        with pytest.raises(ConfigurationError) as info:
            if option.name == "strictOptions":
                check_option_names({k.lower(): v for k, v in options.items()})
            elif WRITE in option.applies and not option.applies - {WRITE}:
                parse_write_options({**BS, **options})
            else:
                parse_read_options(
                    {**READ_BASE, **options}, streaming=option.name == "startingOffsetsFallback"
                )
        message = str(info.value)
        allowed = message.split(", got ")[0]
        assert allowed.startswith(f"Option '{option.name}' must be ")
        for named in option.parse.choices:
            assert named in allowed
        assert (
            f"got {_near_miss(value)!r}; did you mean '{value}'? "
            f'(.option("{option.name}", "{value}"))' in message
        )


def test_a_mistyped_offsets_word_gets_the_closest_word():
    with pytest.raises(ConfigurationError, match="got 'earlest'; did you mean 'earliest'"):
        parse_read_options({**READ_BASE, "startingOffsets": "earlest"}, streaming=True)
