"""Every Kafka API kafka_ds speaks, described once as data (see ``schema.py``).

Transcribed field-for-field from Apache Kafka's JSON message definitions
(clients/src/main/resources/common/message/*.json): names, types, version
ranges, nullable versions and tags. ``valid_versions`` is the range this client
supports; the connection negotiates the highest version the broker also speaks.
"""
from __future__ import annotations

from .schema import F, Message

API_VERSIONS = Message(
    "ApiVersions", 18, valid_versions="0-3", flexible_versions="3+",
    request=(
        F("ClientSoftwareName", "string", "3+"),
        F("ClientSoftwareVersion", "string", "3+"),
    ),
    response=(
        F("ErrorCode", "int16"),
        F("ApiKeys", "[]ApiVersion", "0+",
          F("ApiKey", "int16"),
          F("MinVersion", "int16"),
          F("MaxVersion", "int16")),
        F("ThrottleTimeMs", "int32", "1+"),
        F("SupportedFeatures", "[]SupportedFeatureKey", "3+",
          F("Name", "string", "3+"),
          F("MinVersion", "int16", "3+"),
          F("MaxVersion", "int16", "3+"),
          tag=0),
        F("FinalizedFeaturesEpoch", "int64", "3+", tag=1, default=-1),
        F("FinalizedFeatures", "[]FinalizedFeatureKey", "3+",
          F("Name", "string", "3+"),
          F("MaxVersionLevel", "int16", "3+"),
          F("MinVersionLevel", "int16", "3+"),
          tag=2),
        F("ZkMigrationReady", "bool", "3+", tag=3),
    ),
)

ALL_MESSAGES = {m.name: m for m in [API_VERSIONS]}
BY_KEY = {m.api_key: m for m in ALL_MESSAGES.values()}
