"""A small run of the decoder fuzzer (benchmarks/fuzz_decoder.py runs a million):
mutated Fetch responses and record batches of every codec, legacy message sets,
control batches and decompression bombs raise only kafka_ds's typed errors, never
hang, and stay within memory."""

import os

from benchmarks import fuzz_decoder


def test_two_thousand_mutated_inputs_raise_only_typed_errors(tmp_path):
    summary = fuzz_decoder.fuzz(
        2000,
        workers=1,
        seed=20261123,
        time_cap=5.0,
        memory_limit_mib=3072,
        save_dir=str(tmp_path),
        chunk=500,
    )
    outcomes = summary["outcomes"]
    assert outcomes.get("untyped", 0) == 0, summary["untyped_samples"]
    assert outcomes.get("hang", 0) == 0, summary
    assert sum(outcomes.values()) == 2000
    # The inputs reach both sides: some decode, some are refused with a typed error.
    assert outcomes.get("ok", 0) > 100 and outcomes.get("typed", 0) > 100
    assert summary["inputs_by_mode"].get("crc-fixed", 0) > 300  # past the checksum
    assert summary["worker_peak_rss_mib"] < 1024


def test_a_decompression_bomb_is_capped():
    import pytest

    from kafka_ds.errors import KafkaProtocolError
    from kafka_ds.protocol.records import decode_records

    for codec in (1, 4):
        with pytest.raises(KafkaProtocolError):
            decode_records(
                fuzz_decoder._bomb(codec, 0),
                topic="t",
                partition=0,
                fetch_offset=0,
                max_decompressed_size=8 << 20,
            )


def test_inputs_the_fuzzer_found_raise_corrupt_record_errors():
    """Found by benchmarks/fuzz_decoder.py: a v2 batch whose region start lies past every
    record-start candidate made the vectorised chain check index out of bounds
    (IndexError); now a CorruptRecordError naming the offset."""
    import pytest

    from kafka_ds.errors import CorruptRecordError
    from kafka_ds.protocol.records import decode_records

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
    for name in ("fuzz_chain_index_33033.bin", "fuzz_chain_index_58226.bin"):
        with open(os.path.join(here, name), "rb") as fh:
            data = fh.read()
        for committed in (False, True):
            with pytest.raises(CorruptRecordError, match="partition 0 at offset"):
                decode_records(
                    data,
                    topic="fuzz",
                    partition=0,
                    fetch_offset=0,
                    read_committed=committed,
                    aborted_transactions=[(42, 7)],
                )
