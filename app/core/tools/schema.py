"""A tool's input JSON schema, read as far as the engine needs it: the top-level arguments a call
must have and their JSON types (``schema_problems``), and the one string argument a one-string
model choice fills (``primary_arg``). The tool's server checks the rest. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                            "boolean": (bool,), "array": (list,), "object": (dict,),
                                            "null": (type(None),)}


def schema_problems(schema: Mapping[str, Any], args: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``args`` under a tool's input JSON schema, as far as the top level goes:
    a required argument missing, an argument of the wrong JSON type, an unknown argument where
    the schema allows none. Empty when nothing is."""
    props = schema.get("properties") or {}
    problems = [f"{name}: required" for name in schema.get("required") or [] if name not in args]
    for name, value in args.items():
        prop = props.get(name)
        if not isinstance(prop, dict):
            if props and schema.get("additionalProperties") is False:
                problems.append(f"{name}: not an argument of this tool")
            continue
        wanted = prop.get("type")
        kinds = wanted if isinstance(wanted, list) else [wanted] if isinstance(wanted, str) else []
        allowed = tuple(t for k in kinds for t in _JSON_TYPES.get(k, ()))
        wrong_bool = isinstance(value, bool) and "boolean" not in kinds
        if allowed and (not isinstance(value, allowed) or wrong_bool):
            problems.append(f"{name}: should be {' or '.join(kinds)}")
    return problems


def primary_arg(schema: Mapping[str, Any]) -> str | None:
    """The argument a one-string choice fills: the only required argument when it is a string,
    else the only string argument; None when there is no such single argument."""
    props = schema.get("properties") or {}
    required = [n for n in schema.get("required") or [] if n in props]
    strings = [n for n, p in props.items() if isinstance(p, dict) and p.get("type") == "string"]
    if len(required) == 1:
        return required[0] if required[0] in strings else None
    if not required and len(strings) == 1:
        return strings[0]
    return None
