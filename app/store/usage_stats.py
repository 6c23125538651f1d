"""What the recorded model calls say about each model's speed (the Models view, ``pcm models list``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NamedTuple


class ModelSpeed(NamedTuple):
    """A model's measured speed over its recorded answers: first token and decode rate (medians)."""

    first_token_ms: float
    tokens_per_s: float | None
    answers: int


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def read_model_speeds(db_path: Path, *, last: int = 20) -> dict[str, ModelSpeed]:
    """model name → its speed over its ``last`` successful answers (``model_usage`` rows of stage
    "answer"), read over a read-only connection of its own; {} without a store. A model's speed
    is known from its first answer on."""
    if not Path(db_path).is_file():
        return {}
    conn = sqlite3.connect(f"file:{Path(db_path).as_posix()}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute(
            "SELECT model, first_token_latency_ms, latency_ms, completion_tokens FROM model_usage "
            "WHERE stage = 'answer' AND status = 'success' AND first_token_latency_ms IS NOT NULL "
            "ORDER BY at DESC").fetchall()
    except sqlite3.OperationalError:  # a store from before migration 0006 has no first-token column
        return {}
    finally:
        conn.close()
    grouped: dict[str, list[tuple[float, float | None]]] = {}
    for model, first, latency, completion in rows:
        seen = grouped.setdefault(str(model), [])
        if len(seen) < last:
            decode_s = (float(latency) - float(first)) / 1000
            rate = (int(completion) - 1) / decode_s if int(completion) > 1 and decode_s > 0 else None
            seen.append((float(first), rate))
    out: dict[str, ModelSpeed] = {}
    for model, seen in grouped.items():
        rates = [r for _, r in seen if r is not None]
        out[model] = ModelSpeed(round(_median([f for f, _ in seen]), 1),
                                round(_median(rates), 1) if rates else None, len(seen))
    return out
