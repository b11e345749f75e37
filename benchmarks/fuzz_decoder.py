"""Decoder fuzzing at scale: mutated Fetch responses and record batches through the decoder.

    python benchmarks/fuzz_decoder.py --inputs 1000000          # both cores, ~minutes
    python benchmarks/fuzz_decoder.py --inputs 2000 --workers 1 # what the test suite runs

Seeds (built here with kafka_ds's encoder and by hand): v2 record batches with every
codec (none, gzip, snappy, lz4, zstd), with headers, transactional batches and control
(commit/abort marker) batches, legacy v0/v1 message sets (uncompressed, and gzip/snappy/
lz4 wrapper messages), several batches in a row, decompression bombs (a batch whose
gzip/zstd payload inflates past the cap), and whole Fetch responses (v4, v7, v11, v12)
carrying those record sets. Each input is a seed mutated a few times: bit flips,
interesting bytes (0, 0x7f, 0x80, 0xff), int32/varint fields overwritten with huge or
negative values, cuts, random bytes appended, chunks duplicated or deleted, two seeds
spliced. Half the v2 inputs get their CRC32C recomputed afterwards (and legacy ones
their CRC32) so mutations reach past the checksum into the record structure.

Every input goes through what the reader runs: ``decode_response(FETCH, v, frame)``
for Fetch responses, then ``decode_records`` for each partition's records (odd inputs
``read_committed`` with an aborted-transaction list, even ones plain with headers),
with decompression capped at 8 MiB per batch (the default fetch size). Outcomes:

* ``ok``    -- decoded;
* ``typed`` -- raised a kafka_ds error (KafkaProtocolError / CorruptRecordError ...);
* ``untyped`` -- any other exception: a bug; samples are written to ``--save``;
* ``hang``  -- exceeded the per-input time cap (``--time-cap``, SIGALRM in the worker;
  a parent watchdog also kills a worker stuck in C code).

Memory: the workers' peak RSS is reported (RLIMIT_AS bounds them at ``--memory-limit-mib``
above the address space they were forked with, so a bomb that escaped the cap shows up as a
MemoryError = ``untyped``).

Inputs are generated in the workers from (seed, index), so a failing input is
reproducible with ``--replay INDEX``. Prints a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import resource
import signal
import struct
import sys
import time
import traceback
import zlib
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))

FETCH_VERSIONS = (4, 7, 11, 12)  # the range kafka_ds speaks
CHUNK = 500


class _Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


# --- seeds ------------------------------------------------------------------------------


def _legacy_message(magic, attrs, offset, ts, key, value):
    body = bytearray(struct.pack(">bb", magic, attrs))
    if magic == 1:
        body += struct.pack(">q", ts)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(bytes(body))) + bytes(body)


def _legacy_set(magic, codec, count, base_offset, rng):
    from kafka_ds.protocol.compression import compress

    ts = 1_700_000_000_000
    inner = b"".join(
        _legacy_message(
            magic,
            0,
            (i if (codec and magic == 1) else base_offset + i),
            ts + i,
            None if i % 4 == 1 else b"k%d" % i,
            rng.randbytes(rng.randrange(0, 40)),
        )
        for i in range(count)
    )
    if not codec:
        return inner
    # lz4 in magic 0 uses the old (broken) frame header; the decoder fixes it up.
    payload = compress(codec, inner)
    return _legacy_message(magic, codec, base_offset + count - 1, ts, None, payload)


def _v2_batch(rng, codec, base_offset, *, headers=False, transactional=False, pid=-1, count=None):
    import pyarrow as pa

    from kafka_ds.protocol.records_encode import encode_record_batch

    n = count if count is not None else rng.randrange(1, 30)
    keys = pa.array([None if i % 5 == 0 else b"key%d" % i for i in range(n)], pa.binary())
    values = pa.array(
        [None if i % 7 == 3 else rng.randbytes(rng.randrange(0, 60)) for i in range(n)], pa.binary()
    )
    hdrs = None
    if headers:
        hdrs = [[(f"h{j}", None if j == 1 else b"v" * j) for j in range(i % 3)] for i in range(n)]
    return encode_record_batch(
        keys=keys,
        values=values,
        headers=hdrs,
        base_offset=base_offset,
        compression=codec,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=transactional,
    )


def _refresh_v2_crc(buf: bytearray, pos: int = 0) -> None:
    from crc32c import crc32c  # the package the decoder itself uses

    if len(buf) - pos >= 61:
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        end = min(len(buf), pos + 12 + max(length, 0))
        if end > pos + 21:
            struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : end])))


def _control_batch(base_offset, pid, abort):
    import pyarrow as pa

    from kafka_ds.protocol.records_encode import encode_record_batch

    key = struct.pack(">hh", 0, 0 if abort else 1)
    value = struct.pack(">hi", 0, 5)
    raw = bytearray(
        encode_record_batch(
            keys=pa.array([key]),
            values=pa.array([value]),
            base_offset=base_offset,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=-1,
            is_transactional=True,
        )
    )
    raw[22] |= 0x20  # attributes low byte: control
    _refresh_v2_crc(raw)
    return bytes(raw)


def _bomb(codec, base_offset):
    """A batch whose payload inflates to 64 MiB, past the cap the fuzzer decodes with."""
    import pyarrow as pa

    from kafka_ds.protocol.compression import compress
    from kafka_ds.protocol.records_encode import encode_record_batch

    small = bytearray(
        encode_record_batch(
            keys=None, values=pa.array([b"x"]), base_offset=base_offset, compression=codec
        )
    )
    # Replace the compressed records by a huge run of zeros, compressed.
    bomb = compress(codec, bytes(64 << 20))
    out = small[:61] + bomb
    struct.pack_into(">i", out, 8, len(out) - 12)
    _refresh_v2_crc(out)
    return bytes(out)


def build_seeds(seed: int, with_bombs: bool = True):
    """[(kind, bytes)]: kind 'records' (a records blob) or 'fetch:<version>'."""
    from kafka_ds.protocol import messages as m
    from kafka_ds.protocol.schema import encode_response

    rng = random.Random(seed)
    record_sets = []
    for codec in range(5):
        record_sets.append(_v2_batch(rng, codec, 0))
        record_sets.append(_v2_batch(rng, codec, 100, headers=True))
        record_sets.append(
            _v2_batch(rng, codec, 7, transactional=True, pid=42)
            + _control_batch(40, 42, abort=bool(codec % 2))
        )
        record_sets.append(b"".join(_v2_batch(rng, codec, 10 * i) for i in range(4)))
    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            record_sets.append(_legacy_set(magic, codec, rng.randrange(1, 12), 5, rng))
    record_sets.append(_legacy_set(1, 0, 3, 0, rng) + _v2_batch(rng, 0, 3))  # mixed
    seeds = [("records", blob) for blob in record_sets]
    for version in FETCH_VERSIONS:
        for blob in rng.sample(record_sets, 6):
            body = {
                "throttle_time_ms": 0,
                "error_code": 0,
                "session_id": 0,
                "responses": [
                    {
                        "topic": "fuzz",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "error_code": 0,
                                "high_watermark": 1000,
                                "last_stable_offset": 1000,
                                "log_start_offset": 0,
                                "diverging_epoch": {"epoch": -1, "end_offset": -1},
                                "current_leader": {"leader_id": -1, "leader_epoch": -1},
                                "snapshot_id": {"end_offset": -1, "epoch": -1},
                                "aborted_transactions": [{"producer_id": 42, "first_offset": 7}],
                                "preferred_read_replica": -1,
                                "records": blob,
                            }
                        ],
                    }
                ],
            }
            frame = bytes(encode_response(m.FETCH, version, 1, body))[4:]  # no size prefix
            seeds.append((f"fetch:{version}", frame))
    bombs = []
    if with_bombs:
        bombs = [("records", _bomb(1, 0)), ("records", _bomb(4, 0))]
    return seeds, bombs


# --- mutation -----------------------------------------------------------------------------

INTERESTING32 = (0, 1, -1, 0x7FFFFFFF, -0x80000000, 0x10000, 61, 12, 0xFFFF)


def mutate(data: bytes, rng: random.Random, other: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 5, 8))):
        op = rng.randrange(9)
        n = len(buf)
        if n == 0:
            buf += rng.randbytes(rng.randrange(1, 64))
            continue
        i = rng.randrange(n)
        if op == 0:
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[i] = rng.choice((0, 0x7F, 0x80, 0xFF, 1))
        elif op == 2 and n >= 4:
            j = rng.randrange(n - 3)
            struct.pack_into(">i", buf, j, rng.choice(INTERESTING32))
        elif op == 3:
            del buf[rng.randrange(n + 1) :]
        elif op == 4:
            buf += rng.randbytes(rng.randrange(1, 100))
        elif op == 5:
            j = rng.randrange(n)
            k = min(n, j + rng.randrange(1, 64))
            buf[j:j] = buf[j:k]
        elif op == 6:
            j = rng.randrange(n)
            del buf[j : j + rng.randrange(1, 32)]
        elif op == 7 and other:
            j = rng.randrange(len(other))
            buf = buf[:i] + bytearray(other[j : j + rng.randrange(1, 200)])
        else:  # a varint run: 0xff continuation bytes
            k = min(n, i + rng.randrange(1, 10))
            buf[i:k] = b"\xff" * (k - i)
    return bytes(buf)


def make_input(seeds, bombs, base_seed: int, index: int):
    rng = random.Random(base_seed * 1_000_003 + index)
    if bombs and index % 997 == 0:
        kind, data = bombs[(index // 997) % len(bombs)]
        if rng.random() < 0.5:
            return kind, data, "bomb"
        return kind, mutate(data[:200], rng, b"") + data[200:], "bomb-mutated"
    kind, data = seeds[rng.randrange(len(seeds))]
    other = seeds[rng.randrange(len(seeds))][1]
    mutated = bytearray(mutate(data, rng, other))
    fixed = False
    if kind == "records" and rng.random() < 0.5:
        # Recompute the CRCs of the v2 batches that are still framed, so the mutation
        # reaches the record structure.
        pos = 0
        while pos + 61 <= len(mutated):
            magic = mutated[pos + 16]
            length = struct.unpack_from(">i", mutated, pos + 8)[0]
            if magic == 2:
                _refresh_v2_crc(mutated, pos)
            elif magic in (0, 1) and length >= 4 and pos + 12 + length <= len(mutated):
                crc = zlib.crc32(bytes(mutated[pos + 16 : pos + 12 + length]))
                struct.pack_into(">I", mutated, pos + 12, crc)
            if length <= 0:
                break
            pos += 12 + length
        fixed = True
    return kind, bytes(mutated), "crc-fixed" if fixed else "raw"


# --- decoding -------------------------------------------------------------------------------

CAP = 8 << 20  # max_decompressed_size: the reader's default fetch size (8 MiB)


def decode_one(kind: str, data: bytes, committed: bool = True):
    from kafka_ds.protocol import messages as m
    from kafka_ds.protocol.records import decode_records
    from kafka_ds.protocol.schema import decode_response

    if kind.startswith("fetch:"):
        version = int(kind.split(":")[1])
        body = decode_response(m.FETCH, version, memoryview(bytearray(data)))
        blobs = []
        for topic in body["responses"]:
            for part in topic["partitions"]:
                aborted = [
                    (a["producer_id"], a["first_offset"])
                    for a in (part.get("aborted_transactions") or [])
                ]
                blobs.append((part["records"] or b"", aborted))
    else:
        blobs = [(data, [(42, 7)])]
    rows = 0
    for blob, aborted in blobs:
        if committed:
            result = decode_records(
                blob,
                topic="fuzz",
                partition=0,
                fetch_offset=3,
                read_committed=True,
                aborted_transactions=aborted,
                include_headers=False,
                max_decompressed_size=CAP,
            )
        else:
            result = decode_records(
                blob, topic="fuzz", partition=0, fetch_offset=0, max_decompressed_size=CAP
            )
        rows += 0 if result.batch is None else result.batch.num_rows
    return rows


def _address_space_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _worker_init(memory_limit_mib):
    if memory_limit_mib:
        # A forked worker starts with its parent's address space: a pytest worker that ran
        # Spark and pyarrow tests reserves gigabytes of it, and an absolute limit then
        # failed the seeds' own 64 MiB compression (MemoryError in a CI run). The limit
        # bounds what the decoding adds.
        limit = _address_space_bytes() + (memory_limit_mib << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _on_alarm)


_SEEDS = None


def run_chunk(args):
    base_seed, start, stop, time_cap, save_dir = args
    global _SEEDS
    from kafka_ds.errors import KafkaError

    if _SEEDS is None:
        _SEEDS = build_seeds(base_seed)
    seeds, bombs = _SEEDS
    outcomes = Counter()
    errors = Counter()
    modes = Counter()
    untyped = []
    slowest = (0.0, -1)
    for index in range(start, stop):
        kind, data, mode = make_input(seeds, bombs, base_seed, index)
        modes[mode] += 1
        began = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, time_cap)
        try:
            decode_one(kind, data, committed=bool(index % 2))
            outcome = "ok"
        except _Hang:
            outcome = "hang"
        except KafkaError as exc:
            outcome = "typed"
            errors[type(exc).__name__] += 1
        except Exception as exc:  # noqa: BLE001 - what the fuzzer is looking for
            outcome = "untyped"
            errors[f"UNTYPED {type(exc).__name__}"] += 1
            if len(untyped) < 5:
                untyped.append(
                    {
                        "index": index,
                        "kind": kind,
                        "error": repr(exc)[:300],
                        "trace": traceback.format_exc()[-1500:],
                    }
                )
                if save_dir:
                    with open(os.path.join(save_dir, f"untyped-{index}.bin"), "wb") as fh:
                        fh.write(data)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        took = time.perf_counter() - began
        if took > slowest[0]:
            slowest = (took, index)
        if outcome == "hang" and save_dir:
            with open(os.path.join(save_dir, f"hang-{index}.bin"), "wb") as fh:
                fh.write(data)
        outcomes[outcome] += 1
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return outcomes, errors, modes, untyped, slowest, rss_mib


def fuzz(
    inputs: int,
    workers: int,
    seed: int,
    time_cap: float,
    memory_limit_mib: int,
    save_dir: str | None,
    chunk: int = CHUNK,
    watchdog_s: float = 300.0,
) -> dict:
    if save_dir:
        os.makedirs(save_dir, exist_ok=True)
    tasks = [
        (seed, start, min(start + chunk, inputs), time_cap, save_dir)
        for start in range(0, inputs, chunk)
    ]
    outcomes, errors, modes = Counter(), Counter(), Counter()
    untyped = []
    slowest = (0.0, -1)
    peak_rss = 0.0
    started = time.monotonic()
    ctx = mp.get_context("fork")
    with ctx.Pool(
        workers, initializer=_worker_init, initargs=(memory_limit_mib,), maxtasksperchild=200
    ) as pool:
        results = pool.imap_unordered(run_chunk, tasks)
        for done, _ in enumerate(tasks, 1):
            if done % 100 == 0:
                print(
                    json.dumps(
                        {
                            "progress_inputs": sum(outcomes.values()),
                            "seconds": round(time.monotonic() - started),
                            "outcomes": dict(outcomes),
                        }
                    ),
                    file=sys.stderr,
                    flush=True,
                )
            # The parent's watchdog: a worker stuck in C code (where SIGALRM cannot
            # interrupt) would leave its chunk unanswered.
            o, e, md, u, s, rss = results.next(timeout=watchdog_s)
            outcomes.update(o)
            errors.update(e)
            modes.update(md)
            untyped.extend(u[: max(0, 10 - len(untyped))])
            slowest = max(slowest, s)
            peak_rss = max(peak_rss, rss)
    elapsed = time.monotonic() - started
    return {
        "inputs": inputs,
        "workers": workers,
        "seed": seed,
        "seconds": round(elapsed, 1),
        "inputs_per_s": round(inputs / elapsed),
        "outcomes": dict(outcomes),
        "errors": dict(errors.most_common()),
        "inputs_by_mode": dict(modes),
        "slowest_input_s": round(slowest[0], 3),
        "slowest_index": slowest[1],
        "worker_peak_rss_mib": round(peak_rss, 1),
        "time_cap_s": time_cap,
        "memory_limit_mib": memory_limit_mib,
        "untyped_samples": untyped,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--time-cap", type=float, default=5.0, help="seconds per input")
    parser.add_argument("--memory-limit-mib", type=int, default=3072)
    parser.add_argument("--save", default=None, help="directory for failing inputs")
    parser.add_argument("--replay", type=int, default=None, help="decode one input index")
    args = parser.parse_args(argv)
    if args.replay is not None:
        seeds, bombs = build_seeds(args.seed)
        kind, data, mode = make_input(seeds, bombs, args.seed, args.replay)
        print(kind, mode, len(data))
        print(decode_one(kind, data, committed=bool(args.replay % 2)))
        return None
    summary = fuzz(
        args.inputs, args.workers, args.seed, args.time_cap, args.memory_limit_mib, args.save
    )
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
