"""What a connection says before any other request: ApiVersions (which versions of each
API the broker speaks) and the SASL exchange.

Described as data like every message (see ``messages.py``, the list of them all).
"""

from __future__ import annotations

from .schema import F, Message

API_VERSIONS = Message(
    "ApiVersions",
    18,
    valid_versions="0-3",
    flexible_versions="3+",
    request=(
        F("ClientSoftwareName", "string", "3+"),
        F("ClientSoftwareVersion", "string", "3+"),
    ),
    response=(
        F("ErrorCode", "int16"),
        F(
            "ApiKeys",
            "[]ApiVersion",
            "0+",
            F("ApiKey", "int16"),
            F("MinVersion", "int16"),
            F("MaxVersion", "int16"),
        ),
        F("ThrottleTimeMs", "int32", "1+"),
        F(
            "SupportedFeatures",
            "[]SupportedFeatureKey",
            "3+",
            F("Name", "string", "3+"),
            F("MinVersion", "int16", "3+"),
            F("MaxVersion", "int16", "3+"),
            tag=0,
        ),
        F("FinalizedFeaturesEpoch", "int64", "3+", tag=1, default=-1),
        F(
            "FinalizedFeatures",
            "[]FinalizedFeatureKey",
            "3+",
            F("Name", "string", "3+"),
            F("MaxVersionLevel", "int16", "3+"),
            F("MinVersionLevel", "int16", "3+"),
            tag=2,
        ),
        F("ZkMigrationReady", "bool", "3+", tag=3),
    ),
)

# SASL (KIP-43, KIP-152): SaslHandshake picks the mechanism, SaslAuthenticate
# carries the mechanism's opaque exchange; v1+ answers the session lifetime (KIP-368).
SASL_HANDSHAKE = Message(
    "SaslHandshake",
    17,
    valid_versions="0-1",
    flexible_versions="none",
    request=(F("Mechanism", "string"),),
    response=(
        F("ErrorCode", "int16"),
        F("Mechanisms", "[]string"),
    ),
)

SASL_AUTHENTICATE = Message(
    "SaslAuthenticate",
    36,
    valid_versions="0-2",
    flexible_versions="2+",
    request=(F("AuthBytes", "bytes"),),
    response=(
        F("ErrorCode", "int16"),
        F("ErrorMessage", "string", "0+", nullable="0+"),
        F("AuthBytes", "bytes"),
        F("SessionLifetimeMs", "int64", "1+", default=0),
    ),
)
