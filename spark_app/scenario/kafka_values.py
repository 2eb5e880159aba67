"""Kafka's value types in a scenario: versions (``kafka_version``, protocol and message format
versions) and configuration values parsed as Kafka's ``ConfigDef`` parses them (booleans accept
``true``/``false`` or the strings, any case; ints accept ints or decimal strings).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

SUPPORTED_KAFKA_VERSIONS = (
    *(f"2.{minor}" for minor in range(9)),
    *(f"3.{minor}" for minor in range(5)),
)
DEFAULT_KAFKA_VERSION = "2.8"  # the spec's baseline (§0)
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?$")
_IBP = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:-IV(\d+))?$")


def kafka_version_tuple(version: str) -> tuple[int, int]:
    """``"2.8"`` or ``"2.8.2"`` -> ``(2, 8)``."""
    match = _VERSION.match(version)
    if match is None:
        raise ValueError(f"{version!r} is not a Kafka version like '2.8'")
    return int(match.group(1)), int(match.group(2))


def parse_kafka_version(value: object) -> str:
    """A supported Kafka version string; ``ValueError`` naming the supported ones otherwise."""
    # An unquoted YAML `2.8` arrives as a float; it can only mean the version "2.8".
    text = str(value) if isinstance(value, float) else value
    if not isinstance(text, str) or _VERSION.match(text) is None:
        raise ValueError(f"{value!r} is not a Kafka version; quote it, e.g. kafka_version: '2.8'")
    major, minor = kafka_version_tuple(text)
    if f"{major}.{minor}" not in SUPPORTED_KAFKA_VERSIONS:
        raise ValueError(
            f"Kafka {text} is not emulated; use one of {', '.join(SUPPORTED_KAFKA_VERSIONS)}"
        )
    return text


KafkaVersion = Annotated[str, BeforeValidator(parse_kafka_version)]


def ibp_key(ibp: str) -> tuple[int, int, int, int]:
    """Sort key of an ``inter.broker.protocol.version``; no ``-IVn`` means the release's latest."""
    match = _IBP.match(ibp)
    if match is None:
        raise ValueError(f"{ibp!r} is not an inter.broker.protocol.version like '2.7-IV2'")
    major, minor, patch, iv = match.groups()
    return int(major), int(minor), int(patch or 0), int(iv) if iv is not None else 1_000


def _ibp(value: object) -> str:
    if isinstance(value, float):  # unquoted YAML 2.7
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a protocol version; write e.g. '2.7-IV2' or '2.8'")
    ibp_key(value)
    return value


def kafka_bool(value: object) -> bool:
    # Kafka's ConfigDef.parseType(BOOLEAN): a Boolean, or "true"/"false" ignoring case and blanks.
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f'{value!r} is not a boolean; Kafka accepts true/false or "true"/"false"')


def kafka_int(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise ValueError(f"{value!r} is not an integer; write e.g. 5000 or '5000'")


KafkaBool = Annotated[bool, BeforeValidator(kafka_bool)]
KafkaInt = Annotated[int, BeforeValidator(kafka_int)]
ProtocolVersion = Annotated[str, BeforeValidator(_ibp)]


def unset_or(parse: Any) -> Any:
    # None (a dumped, unset key) stays unset; anything else must parse.
    return lambda value: None if value is None else parse(value)


OptionalKafkaInt = Annotated[int | None, BeforeValidator(unset_or(kafka_int))]

# Kafka's 0.x releases, which log.message.format.version names with three numbers ("0.10.2").
_ZERO_RELEASES = ((8, 0), (8, 1), (8, 2), (9, 0), (10, 0), (10, 1), (10, 2), (11, 0))
_FORMAT_HINT = "write a Kafka version, quoted, like '0.10.2', '0.11.0', '2.8' or '2.8-IV1'"


def parse_message_format(value: object) -> str:
    """A ``log.message.format.version`` Kafka's ``ApiVersion`` knows; ``ValueError`` otherwise.

    0.x releases take three numbers ("0.10.2"), later ones two ("2.8"; a patch is dropped as Kafka
    drops it), each optionally with ``-IVn``.
    """
    # An unquoted YAML 2.8 is a float; 0.10 would arrive as 0.1 and is rejected below.
    text = str(value) if isinstance(value, float) else value
    match = _IBP.match(text) if isinstance(text, str) else None
    shown = f"the number {value!r}" if isinstance(value, float) else repr(value)
    if match is None:
        raise ValueError(f"{shown} is not a log.message.format.version; {_FORMAT_HINT}")
    major, minor, patch, iv = match.groups()
    suffix = f"-IV{iv}" if iv is not None else ""
    if major == "0":
        if patch is None or (int(minor), int(patch)) not in _ZERO_RELEASES:
            raise ValueError(f"{shown} is not a Kafka 0.x release; {_FORMAT_HINT}")
        return f"0.{int(minor)}.{int(patch)}{suffix}"
    if int(major) not in (1, 2, 3) or (major == "1" and int(minor) > 1):
        raise ValueError(f"{shown} is not a Kafka release; {_FORMAT_HINT}")
    return f"{int(major)}.{int(minor)}{suffix}"


MessageFormatVersion = Annotated[str, BeforeValidator(parse_message_format)]


def record_version(version: str) -> int:
    """The record format (magic) a message format or protocol version writes: 0 before 0.10.0,
    1 for 0.10.x (timestamps, KIP-32), 2 from 0.11.0 (record batches, KIP-98)."""
    key = ibp_key(version)
    if key < (0, 10, 0, 0):
        return 0
    return 1 if key < (0, 11, 0, 0) else 2
