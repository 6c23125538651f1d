"""bench helpers (fast) and a one-run smoke test of bench_models on the real models (``model``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from app.llm.bench import _stats, bench_models, format_report
from app.llm.llama import grammar_schema


def test_stats_p95_is_the_slow_tail() -> None:
    times = _stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert times["median"] == 3.0 and times["p95"] > 4.0 and times["n"] == 5
    rates = _stats([10.0, 50.0, 60.0, 70.0, 80.0], higher_is_better=True)
    assert rates["median"] == 60.0 and rates["p95"] < 50.0
    assert math.isnan(_stats([])["median"])


def test_format_report_renders_every_section() -> None:
    s = {"median": 1.0, "p95": 2.0, "min": 1.0, "max": 2.0, "n": 3}
    report = {
        "machine": {"platform": "test", "python": "3.11", "cpu_count": 2},
        "runs": 3,
        "baseline_ms": s,
        "baseline_after_ms": s,
        "chat": {"model": "m.gguf", "llama_cpp_version": "0.3.36", "n_threads": 2, "context_size": 2048,
                 "prompt_tokens": 40, "max_tokens": 64, "import_s": 0.1, "load_s": s, "first_token_ms": s,
                 "decode_tokens_per_s": s, "tokens_per_s": s, "completion_tokens": s,
                 "long_prompt_tokens": 900, "long_first_token_ms": s, "prompt_eval_tokens_per_s": s,
                 "cached_prefix_first_token_ms": s},
        "embed": {"model": "e", "dim": 384, "torch_version": "2", "torch_threads": 2, "import_s": 1.0,
                  "load_s": s, "batch1_texts_per_s": s, "batch64_texts_per_s": s},
    }
    text = format_report(report)
    for needle in ("first token", "decode", "prompt eval", "batch 1", "batch 64", "baseline"):
        assert needle in text


def test_grammar_schema_turns_small_integer_ranges_into_enums() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 0, "maximum": 3},
        "b": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
        "c": {"type": "integer", "minimum": 0},
        "d": {"type": "array", "items": {"type": "integer", "minimum": -1, "maximum": 1}}}}
    out = grammar_schema(schema)
    props = out["properties"]
    assert props["a"] == {"enum": [0, 1, 2, 3]} and props["b"] == {"enum": [1, 2]}
    assert props["c"] == {"type": "integer", "minimum": 0}
    assert props["d"]["items"] == {"enum": [-1, 0, 1]}
    assert schema["properties"]["a"]["type"] == "integer"  # the input is not modified


@pytest.mark.model
def test_bench_models_smoke(chat_model_path: Path, embed_model_dir: Path) -> None:
    report = bench_models(chat_model_path, embed_model_dir, runs=1, max_tokens=16)
    json.dumps(report)  # plain data
    assert report["chat"]["decode_tokens_per_s"]["median"] > 0
    assert report["chat"]["first_token_ms"]["median"] > 0
    assert report["embed"]["batch64_texts_per_s"]["median"] > 0
    assert "tok/s" in format_report(report)
