"""``ScenarioError``: every problem of a scenario as ``(yaml.path, message)``, one line each.

Pydantic's errors are mapped to the same form by walking the model types along each error's
``loc``: list indices become ``[i]``, discriminated-union tags (``broker_failure``) are dropped,
and an unknown key is reported with the closest known key of the model it was found in.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Union

from pydantic import BaseModel, Discriminator, Tag, ValidationError
from pydantic.fields import FieldInfo

Problem = tuple[str, str]
"""``(path, message)``: ``("events[3].brokers[0]", "broker 9 is not a broker of the cluster; ...")``."""


def join_path(*parts: str | int) -> str:
    """``("events", 3, "brokers")`` -> ``events[3].brokers``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def format_problems(problems: Sequence[Problem], source: str | None = None) -> str:
    """One line per problem (``path: message``), under a ``source: N problem(s):`` header if given."""
    lines = [f"{path or '(top level)'}: {message}" for path, message in problems]
    if source is None:
        return "\n".join(lines)
    return "\n".join([f"{source}: {len(problems)} problem(s):", *(f"  {line}" for line in lines)])


class ScenarioError(ValueError):
    """An invalid scenario; ``problems`` lists every ``(path, message)`` found."""

    def __init__(self, problems: Sequence[Problem], source: str | None = None) -> None:
        self.problems: list[Problem] = list(problems)
        self.source = source
        super().__init__(format_problems(self.problems))

    def __str__(self) -> str:
        return format_problems(self.problems)


def _unwrap(tp: Any) -> tuple[Any, Any]:
    """(bare type, discriminator or None): strips Annotated and Optional."""
    discriminator = None
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            for meta in tp.__metadata__:
                if isinstance(meta, Discriminator) or (
                    isinstance(meta, FieldInfo) and meta.discriminator is not None
                ):
                    discriminator = meta
            tp = tp.__origin__
            continue
        if typing.get_origin(tp) in (Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp, discriminator


def _tagged_member(tp: Any, discriminator: Any, tag: object) -> Any | None:
    """The union member a discriminated-union ``tag`` selects, or None."""
    field_name = getattr(discriminator, "discriminator", None)
    for member in typing.get_args(tp):
        for meta in getattr(member, "__metadata__", ()):
            if isinstance(meta, Tag) and meta.tag == tag:
                return member
        bare, _ = _unwrap(member)
        if isinstance(bare, type) and issubclass(bare, BaseModel):
            field = bare.model_fields.get(field_name) if isinstance(field_name, str) else None
            if field is not None and tag in typing.get_args(field.annotation):
                return bare
    return None


def _field(model: type[BaseModel], key: object) -> FieldInfo | None:
    for name, field in model.model_fields.items():
        if key in (field.alias, name):
            return field
    return None


def _model_keys(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(f.alias or n for n, f in model.model_fields.items())


def locate(root: type[BaseModel], loc: Sequence[str | int]) -> tuple[list[str | int], Any, Any]:
    """YAML path parts of a pydantic ``loc``, the model holding its last key, the type at it."""
    parts: list[str | int] = []
    tp: Any = root
    holder: Any = None
    for item in loc:
        bare, discriminator = _unwrap(tp) if tp is not None else (None, None)
        if discriminator is not None:
            member = _tagged_member(bare, discriminator, item)
            if member is not None:  # a union tag, not a YAML key
                tp = member
                continue
        if isinstance(bare, type) and issubclass(bare, BaseModel):
            holder = bare
            field = _field(bare, item)
            # The field's own FieldInfo carries a `discriminator=` given on the field.
            tp = typing.Annotated[(field.annotation, field, *field.metadata)] if field else None
            parts.append(item)
            continue
        origin = typing.get_origin(bare)
        if item == "[key]":  # pydantic's marker for a bad mapping key
            continue
        if origin in (list, tuple) and isinstance(item, int):
            tp = typing.get_args(bare)[0]
        elif origin is dict:
            tp = typing.get_args(bare)[1]
            item = str(item)
        else:
            tp = None
        parts.append(item)
    return parts, holder, tp


def _tags(tp: Any, name: str) -> tuple[str, ...]:
    """The tags of a union discriminated by field ``name`` (for a 'tag is missing' hint)."""
    bare, _ = _unwrap(tp)
    out: list[str] = []
    for member in typing.get_args(bare):
        member, _ = _unwrap(member)
        field = getattr(member, "model_fields", {}).get(name)
        if field is not None:
            out.extend(str(t) for t in typing.get_args(field.annotation))
    return tuple(out)


def _message(error: Mapping[str, Any], holder: Any, key: object, tp: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden" and isinstance(holder, type):
        misplaced = getattr(holder, "misplaced_keys", None)
        from spark_app.scenario.kafka_config import unknown_key_message

        return unknown_key_message(str(key), _model_keys(holder), misplaced)
    if kind == "missing":
        return f"required key {key!r} is missing; add it"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        ctx = error.get("ctx", {})
        tag = str(ctx.get("discriminator", "the tag")).strip("'")
        expected = tuple(t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(","))
        if kind == "union_tag_not_found":
            return f"{tag!r} is missing; add {tag}: <one of {', '.join(_tags(tp, tag))}>"
        close = difflib.get_close_matches(str(ctx.get("tag", "")), expected, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"use one of: {', '.join(expected)}"
        return f"unknown {tag} {ctx.get('tag')!r}; {hint}"
    if kind == "too_short":  # pydantic says "Tuple should have at least 1 item after validation"
        ctx = error.get("ctx", {})
        have = ctx.get("actual_length")
        return (
            f"{'empty' if have == 0 else f'{have} item(s)'}; list at least {ctx.get('min_length')}"
        )
    msg = str(error["msg"]).removeprefix("Value error, ")
    got = error.get("input")
    if kind != "value_error" and (got is None or isinstance(got, str | int | float)):
        msg = f"{msg} (got {got!r})"
    return msg


def problems_from_validation_error(root: type[BaseModel], err: ValidationError) -> list[Problem]:
    """Pydantic's errors as ``(yaml.path, message)``, cross-field problems expanded in place."""
    problems: list[Problem] = []
    for error in err.errors():
        if error["type"] == "default_factory_not_called":
            continue  # a default built from other fields, one of which is reported already
        parts, holder, tp = locate(root, error["loc"])
        inner = error.get("ctx", {}).get("error")
        if isinstance(inner, ScenarioError):
            prefix = join_path(*parts)
            problems.extend(
                (f"{prefix}.{path}" if prefix and path else prefix or path, message)
                for path, message in inner.problems
            )
            continue
        ctx = error.get("ctx") or {}
        got = error.get("input")
        if (
            error["type"] == "too_short"
            and isinstance(got, list | tuple)
            and len(got) >= ctx.get("min_length", 0)
        ):
            continue  # pydantic counts only valid items; the invalid ones are reported already
        key = error["loc"][-1] if error["loc"] else None
        problems.append((join_path(*parts), _message(error, holder, key, tp)))
    return problems
