"""Virtual-time durations of a scenario: ``"0s"``, ``"500ms"``, ``"5m"``, ``"1h"`` or int milliseconds.

Every duration is parsed to an ``int`` of milliseconds once, at load time, so the runner only ever
sees integers. Floats, booleans and negative values are rejected: virtual time is integral (Kafka's
clocks are ``long`` milliseconds) and a YAML ``true`` is never meant as a time.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from statemachines.schemas import LONG_MAX

_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h)\s*$")
_HINT = 'write an int of milliseconds or a number with a unit: "500ms", "5s", "5m", "1h"'


def parse_duration(value: object) -> int:
    """``value`` as int milliseconds; ``ValueError`` naming the accepted forms otherwise."""
    if isinstance(value, bool):  # bool is an int subclass; a YAML `true` is never a time
        raise ValueError(f"{value!r} is not a duration; {_HINT}")
    ms: int | None = None
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value} is negative; durations are >= 0 ({_HINT})")
        ms = value
    elif isinstance(value, str):
        if value.strip().isdigit():
            ms = int(value)
        elif match := _DURATION.match(value):
            ms = int(match.group(1)) * _UNIT_MS[match.group(2)]
    if ms is None:
        raise ValueError(f"{value!r} is not a duration; {_HINT}")
    if ms > LONG_MAX:
        raise ValueError(f"{value!r} is beyond Kafka's clock (a Long of ms); {_HINT}")
    return ms


def format_duration(ms: int) -> str:
    """The shortest exact unit form of ``ms`` (``5000`` -> ``"5s"``); the inverse of parsing."""
    if ms == 0:
        return "0s"
    for unit in ("h", "m", "s"):
        if ms and ms % _UNIT_MS[unit] == 0:
            return f"{ms // _UNIT_MS[unit]}{unit}"
    return f"{ms}ms"


Duration = Annotated[int, BeforeValidator(parse_duration)]
"""A field type: accepts every form ``parse_duration`` does, holds int milliseconds."""


def _positive(ms: int) -> int:
    if ms <= 0:
        raise ValueError(
            f"a duration of {format_duration(ms)} does nothing; give one > 0 ({_HINT})"
        )
    return ms


PositiveDuration = Annotated[Duration, AfterValidator(_positive)]
"""A ``Duration`` that must be > 0: how long a fault lasts."""
