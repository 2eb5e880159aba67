"""Shared machinery of the two state machines: states as data, legality as one Column expression."""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import TypeVar

from pyspark.sql import Column
from pyspark.sql import functions as F

S = TypeVar("S", bound=IntEnum)


def valid_previous_column(
    current_code: Column, target: S, table: Mapping[S, frozenset[S]]
) -> Column:
    """True where a row in state ``current_code`` may move to ``target`` (Kafka's check)."""
    return current_code.isin([int(s) for s in sorted(table[target])])


def state_name_column(code: Column, states: type[S]) -> Column:
    """Kafka's state name for a code column (a CASE over the enum; unknown codes give null)."""
    expr = None
    for s in states:
        expr = (F.when if expr is None else expr.when)(code == int(s), F.lit(s.name))
    assert expr is not None
    return expr


def state_code_column(name: Column, states: type[S]) -> Column:
    """The byte code for a Kafka state name column (unknown names give null)."""
    expr = None
    for s in states:
        expr = (F.when if expr is None else expr.when)(name == s.name, F.lit(int(s)))
    assert expr is not None
    return expr.cast("byte")


def allowed_names(target: S, table: Mapping[S, frozenset[S]]) -> str:
    """Kafka's rendering of the allowed previous states, e.g. ``NewPartition,OnlinePartition``."""
    return ",".join(s.name for s in sorted(table[target]))
