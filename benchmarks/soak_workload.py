"""The soak's workload: the source producer (confluent-kafka, Avro, acknowledged offsets
kept), the network faults thread (broker outages and stalled answers through the fault
proxy) and the Schema Registry whose outages the soak makes."""

from __future__ import annotations

import collections
import json
import threading
import time
from array import array

from soak_common import SCHEMA_V1, SCHEMA_V2, STALLABLE, log, now

# --- the source -------------------------------------------------------------------------


class SourceProducer(threading.Thread):
    """Avro records at ``rate``/s, partition = n % partitions; acknowledged offsets kept
    compactly (16 bytes a record: offset and id per partition)."""

    def __init__(self, bootstrap, registry_url, topic, partitions, rate):
        super().__init__(daemon=True, name="producer")
        from confluent_kafka import Producer
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 20,
                "message.timeout.ms": 600000,
                "log_level": 0,
            }
        )
        self.registry = SchemaRegistryClient({"url": registry_url})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.offsets = [array("q") for _ in range(partitions)]
        self.ids = [array("q") for _ in range(partitions)]
        self.failed = 0
        # id -> partition of records delivered without an offset: librdkafka's idempotent
        # producer reports a retried batch the broker already had (a node killed with the
        # answer on its way) as delivered, offset unknown; the check finds them by id
        self.without_offset: dict[int, int] = {}
        self.errors = collections.Counter()
        self.produced = 0
        self.version = 1
        self._serializer = self._make_serializer(SCHEMA_V1)
        self._switch = threading.Event()
        self.v2_from_id = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def _make_serializer(self, schema):
        from confluent_kafka.schema_registry.avro import AvroSerializer

        return AvroSerializer(
            self.registry, json.dumps(schema), conf={"auto.register.schemas": True}
        )

    def switch_to_v2(self):
        """Register version 2 (now: the registry must be up) and write it from now on."""
        from confluent_kafka.serialization import MessageField, SerializationContext

        serializer = self._make_serializer(SCHEMA_V2)
        serializer(
            {"id": -1, "sensor": "probe", "reading": 0.0, "ts": 0, "unit": None},
            SerializationContext(self.topic, MessageField.VALUE),
        )  # registers it
        self._v2 = serializer
        self._switch.set()

    def acked(self) -> int:
        with self.lock:
            return sum(len(a) for a in self.offsets)

    def end_offsets(self) -> list[int]:
        with self.lock:
            return [(max(a) + 1 if len(a) else 0) for a in self.offsets]

    def run(self):
        from confluent_kafka.serialization import MessageField, SerializationContext

        ctx = SerializationContext(self.topic, MessageField.VALUE)
        n = 0
        started = time.monotonic()
        while not self.stopping.is_set():
            if self._switch.is_set() and self.version == 1:
                self._serializer, self.version, self.v2_from_id = self._v2, 2, n
            target = int((time.monotonic() - started) * self.rate)
            while n < target:
                record = {
                    "id": n,
                    "sensor": f"s{n % 97}",
                    "reading": n * 0.5,
                    "ts": int(time.time() * 1000),
                }
                if self.version == 2:
                    record["unit"] = "C" if n % 2 else None
                value = self._serializer(record, ctx)
                partition = n % self.partitions
                try:
                    self.producer.produce(
                        self.topic, value=value, partition=partition, on_delivery=self._callback(n)
                    )
                except BufferError:
                    break
                n += 1
            self.produced = n
            self.producer.poll(0.05)
        left = self.producer.flush(600)
        if left:
            log(f"producer: {left} records not delivered at the end")

    def _callback(self, n):
        def done(err, msg):
            if err is not None:
                self.failed += 1
                self.errors[str(err)[:200]] += 1
                return
            with self.lock:
                if msg.offset() is None:
                    self.without_offset[n] = msg.partition()
                    return
                self.offsets[msg.partition()].append(msg.offset())
                self.ids[msg.partition()].append(n)

        return done

    def acknowledged(self) -> dict:
        """{(partition, offset): id} of every acknowledged record."""
        with self.lock:
            return {
                (p, o): i
                for p in range(self.partitions)
                for o, i in zip(self.offsets[p], self.ids[p], strict=True)
            }


# --- network faults -----------------------------------------------------------------------


class NetworkFaults(threading.Thread):
    def __init__(self, proxy, every, down_max, stall_max, rng, events):
        super().__init__(daemon=True, name="network-faults")
        self.proxy, self.every, self.down_max, self.stall_max = proxy, every, down_max, stall_max
        self.rng, self.events = rng, events
        self.counts = collections.Counter()
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.wait(self.rng.uniform(0.5, 1.5) * self.every):
            if self.rng.random() < 0.4:
                seconds = self.rng.uniform(2.0, self.down_max)
                self.proxy.down()
                self.events.append((now(), "broker_down", round(seconds, 1)))
                self.counts["broker_outages"] += 1
                self.counts["broker_down_s"] += round(seconds)
                self.stopping.wait(seconds)
                self.proxy.up()
            else:
                name = self.rng.choice(list(STALLABLE))
                seconds = self.rng.uniform(1.0, self.stall_max)
                self.proxy.inject(STALLABLE[name], "stall", seconds=seconds)
                self.events.append((now(), f"stall {name}", round(seconds, 1)))
                self.counts[f"stall_{name}"] += 1
        self.proxy.up()


# --- the registry ------------------------------------------------------------------------


class SoakRegistry:
    """The soak's Schema Registry: ``stop()``/``start()`` make and end an outage,
    ``requests()`` counts what reached it (connections through the proxy: kafka_ds's
    client opens one per request; the fake logs requests)."""

    def __init__(self, name: str):
        self.name = name
        if name == "apicurio":
            from tests.support.apicurio import CCOMPAT_PATH, Apicurio
            from tests.support.outage_proxy import OutageProxy

            self._server = Apicurio()
            self._proxy = OutageProxy("127.0.0.1", self._server.port)
            self.url = f"http://127.0.0.1:{self._proxy.port}{CCOMPAT_PATH}"
            log(f"Apicurio started in {self._server.start_seconds:.1f} s")
        else:
            from tests.support.schema_registry import FakeSchemaRegistry

            self._fake = FakeSchemaRegistry().start()
            self.url = self._fake.url

    def stop(self):
        if self.name == "apicurio":
            self._proxy.down()
        else:
            self._fake.stop()

    def start(self):
        if self.name == "apicurio":
            self._proxy.up()
        else:
            self._fake.start()

    def requests(self) -> int:
        if self.name == "apicurio":
            return self._proxy.connections
        return len(self._fake.requests)

    def close(self):
        if self.name == "apicurio":
            self._proxy.close()
            self._server.stop()
        else:
            self._fake.stop()
