"""Golden files: intent inference and plan building give byte-identical output on a fixed case set.

The files were written from the code before its long functions were split; any difference is a
behaviour change. To accept an intended change, regenerate with
``python3 -m tests.core.intent.golden_cases`` and say why in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.intent.golden_cases import INFER_FILE, PLAN_FILE, infer_lines, plan_lines


def _first_difference(expected: str, actual: str) -> str:
    """Describe where two JSON lines differ: the first differing key path, else the first character."""
    def walk(a: object, b: object, path: str) -> str | None:
        if type(a) is not type(b):
            return f"{path}: {a!r} != {b!r}"
        if isinstance(a, dict) and isinstance(b, dict):
            for key in list(a) + [k for k in b if k not in a]:
                if key not in a or key not in b:
                    return f"{path}.{key}: only in {'actual' if key in b else 'expected'}"
                if (d := walk(a[key], b[key], f"{path}.{key}")) is not None:
                    return d
            return None
        if isinstance(a, list) and isinstance(b, list):
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                if (d := walk(x, y, f"{path}[{i}]")) is not None:
                    return d
            return None if len(a) == len(b) else f"{path}: length {len(a)} != {len(b)}"
        return None if a == b else f"{path}: expected {a!r}, got {b!r}"

    found = walk(json.loads(expected), json.loads(actual), "")
    if found is not None:
        return found
    i = next((k for k, (x, y) in enumerate(zip(expected, actual, strict=False)) if x != y),
             min(len(expected), len(actual)))
    return f"same values, different bytes at char {i}: {expected[i - 20:i + 20]!r} vs {actual[i - 20:i + 20]!r}"


def _compare(path: Path, actual: list[str]) -> None:
    expected = path.read_text(encoding="utf-8").splitlines()
    assert len(actual) == len(expected), (
        f"{path.name}: {len(actual)} cases generated, {len(expected)} in the golden file "
        "(the case generator changed? regenerate only for an intended change)")
    bad = [(e, a) for e, a in zip(expected, actual, strict=True) if e != a]
    if bad:
        lines = [f"{json.loads(e)['case']}: {_first_difference(e, a)}" for e, a in bad[:10]]
        pytest.fail(f"{path.name}: {len(bad)} of {len(expected)} cases differ; first ones:\n  " + "\n  ".join(lines))


def test_infer_matches_golden_file() -> None:
    _compare(INFER_FILE, infer_lines())


def test_plan_matches_golden_file() -> None:
    _compare(PLAN_FILE, plan_lines())
