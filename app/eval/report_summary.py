"""The evaluation report's figures, computed from the PRED files alone (``app.eval.report_run``).

``summarize(pred)`` reads ``OUT/pred`` and returns ``(summary, series)``: ``summary`` is what
``OUT/summary.json`` holds (every figure of the report, rounded, in a fixed order), ``series`` the
per-item values the plots draw. Nothing here reads the datasets or runs a model: the report is
regenerated exactly from the same files.

Conventions (seed 000 §8.8): every comparison is paired (the same question, message or item under
two strategies) and reads *PCM minus the other*: for a control, a positive difference says PCM is
better; for an ablation, it is the closed mechanism's contribution (positive: the mechanism
helps). Each carries its 95 % bootstrap interval, the Wilcoxon signed-rank p (Holm-adjusted over
the rows of its table), Cohen's d_z and the rank-biserial correlation. Recall and F1 figures leave
the adversarial questions out (they ask about things that never happened), as ``pcm eval recall``
does; adversarial answers are scored by abstention, apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.eval.conflicts import OUTCOMES
from app.eval.report_verdicts import ablation_rows
from app.eval.stats import compare, holm, mean_ci
from app.eval.strategies import PCM, STRATEGIES

ADVERSARIAL = "adversarial"
BACK_BINS = ((1, 50, "1–50 turns back"), (51, 200, "51–200 turns back"), (201, 10**9, "over 200 turns back"))
DIALOGUE_METRICS = ("recall", "precision", "answer_f1", "exact")
STREAM_METRICS = ("purity", "thread_recall")


def load_lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _r(value: Any, digits: int = 4) -> Any:
    """Floats rounded (recursively), so summary.json reads and diffs well."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: _r(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_r(v, digits) for v in value]
    return value


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else None


def _ordered(names: Iterable[str]) -> list[str]:
    known = [n for n in STRATEGIES if n in set(names)]
    return known + sorted(set(names) - set(known))


def _files(folder: Path) -> dict[str, list[dict[str, Any]]]:
    return {p.stem: load_lines(p) for p in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}


# --------------------------------------------------------------------------- pairing


Values = dict[tuple[str, int], float]  # (item, budget) → value


def values_of(lines: Iterable[Mapping[str, Any]], metric: str, key: str,
              keep: Callable[[Mapping[str, Any]], bool] = lambda _x: True) -> Values:
    """(item, budget) → the line's ``metric`` (lines without it, or not kept, left out)."""
    return {(str(x[key]), int(x["budget"])): float(x[metric]) for x in lines
            if x.get(metric) is not None and keep(x)}


def comparisons(per: Mapping[str, Values], budgets: Sequence[int]) -> dict[str, dict[str, Any]]:
    """PCM against every other strategy at every budget, over the items both have (module doc);
    the p-values Holm-adjusted over the whole table."""
    ref = per.get(PCM.name, {})
    table: dict[str, dict[str, Any]] = {}
    for name, vals in per.items():
        if name == PCM.name:
            continue
        for budget in budgets:
            keys = sorted(k for k in ref if k[1] == budget and k in vals)
            table.setdefault(name, {})[str(budget)] = compare([ref[k] for k in keys], [vals[k] for k in keys])
    cells = [c for row in table.values() for c in row.values()]
    for cell, adjusted in zip(cells, holm([c["p"] for c in cells])):
        cell["p_holm"] = adjusted
    return table


def by_budget(vals: Values, budgets: Sequence[int]) -> dict[str, dict[str, Any]]:
    return {str(b): mean_ci([v for (_, bb), v in sorted(vals.items()) if bb == b]) for b in budgets}


# --------------------------------------------------------------------------- dialogue


def _length_bins(lines: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """Conversation length (turns) → its stratum: the conversations in up to three groups of
    about equal count, labelled by their range of lengths."""
    sizes = sorted({int(x["conv_turns"]) for x in lines})
    groups = [g for g in np.array_split(np.asarray(sizes), min(3, len(sizes))) if len(g)] if sizes else []
    out = {}
    for g in groups:
        label = f"{g[0]} turns" if g[0] == g[-1] else f"{g[0]}–{g[-1]} turns"
        out.update({int(v): label for v in g})
    return out


def _back_label(back: Any) -> str | None:
    if back is None:
        return None
    return next(label for low, high, label in BACK_BINS if low <= int(back) <= high)


def strata(lines_by: Mapping[str, Sequence[Mapping[str, Any]]], metric: str, budgets: Sequence[int],
           stratum: Callable[[Mapping[str, Any]], str | None]) -> dict[str, Any]:
    """Per strategy, budget and stratum: the mean of ``metric`` and n."""
    out: dict[str, Any] = {}
    for name, lines in lines_by.items():
        for b in budgets:
            cells: dict[str, list[float]] = {}
            for x in lines:
                label = stratum(x)
                if int(x["budget"]) == b and label is not None and x.get(metric) is not None:
                    cells.setdefault(label, []).append(float(x[metric]))
            out.setdefault(name, {})[str(b)] = {k: {"mean": float(np.mean(v)), "n": len(v)}
                                                for k, v in sorted(cells.items())}
    return out


def efficiency(lines_by: Mapping[str, Sequence[Mapping[str, Any]]], budgets: Sequence[int]) -> dict[str, Any]:
    """Token efficiency: per strategy the mean context tokens and recall at each budget, recall per
    1,000 tokens, and the tokens it needs to reach PCM's recall at each budget (linear between its
    measured budgets; None when it never gets there)."""
    points: dict[str, list[tuple[float, float]]] = {}
    for name, lines in lines_by.items():
        core = [x for x in lines if x["category"] != ADVERSARIAL]
        points[name] = [(float(np.mean([x["tokens"] for x in core if x["budget"] == b])),
                         float(np.mean([x["recall"] for x in core if x["budget"] == b]))) for b in budgets
                        if any(x["budget"] == b for x in core)]
    targets = {str(b): r for b, (_, r) in zip(budgets, points.get(PCM.name, []))}
    out: dict[str, Any] = {"targets": targets, "strategies": {}}
    for name, pts in points.items():
        out["strategies"][name] = {
            "tokens": {str(b): t for b, (t, _) in zip(budgets, pts)},
            "recall_per_1k": {str(b): (r / t * 1000 if t else None) for b, (t, r) in zip(budgets, pts)},
            "tokens_for_pcm_recall": {b: _tokens_for(pts, target) for b, target in targets.items()},
        }
    return out


def _tokens_for(points: Sequence[tuple[float, float]], target: float) -> float | None:
    """The tokens at which the (tokens, recall) curve first reaches ``target`` (linear between points)."""
    prev: tuple[float, float] | None = None
    for tokens, recall in sorted(points):
        if recall >= target:
            if prev is None or recall == prev[1]:
                return tokens
            return prev[0] + (target - prev[1]) * (tokens - prev[0]) / (recall - prev[1])
        prev = (tokens, recall)
    return None


def latency(lines_by: Mapping[str, Sequence[Mapping[str, Any]]], budgets: Sequence[int]) -> dict[str, Any]:
    """Build time per strategy: p50 and p95 at each budget and over all."""
    out: dict[str, Any] = {}
    for name, lines in lines_by.items():
        ms = [float(x["build_ms"]) for x in lines if x.get("build_ms") is not None]
        if not ms:
            continue
        row = {str(b): {"p50": _pct([float(x["build_ms"]) for x in lines if x["budget"] == b], 50),
                        "p95": _pct([float(x["build_ms"]) for x in lines if x["budget"] == b], 95)} for b in budgets}
        out[name] = {**row, "all": {"p50": _pct(ms, 50), "p95": _pct(ms, 95)}}
    return out


def dialogue(folder: Path, budgets: Sequence[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The figures of one dialogue dataset (and the per-item series for the plots)."""
    lines_by = {n: v for n, v in _files(folder).items()}
    answers_by = _files(folder / "answers")
    names = _ordered(lines_by)
    lines_by = {n: lines_by[n] for n in names}
    core = lambda x: x["category"] != ADVERSARIAL  # noqa: E731 - a filter named once
    per: dict[str, dict[str, Values]] = {
        "recall": {n: values_of(v, "recall", "qid", core) for n, v in lines_by.items()},
        "precision": {n: values_of(v, "precision", "qid", core) for n, v in lines_by.items()},
        "tokens": {n: values_of(v, "tokens", "qid") for n, v in lines_by.items()},
        "build_ms": {n: values_of(v, "build_ms", "qid") for n, v in lines_by.items()},
        "answer_f1": {n: values_of(v, "f1", "qid") for n, v in _ordered_map(answers_by).items()},
        "exact": {n: values_of(v, "exact", "qid") for n, v in _ordered_map(answers_by).items()},
        "abstained": {n: values_of(v, "abstained", "qid", lambda x: x["category"] == ADVERSARIAL)
                      for n, v in _ordered_map(answers_by).items()},
    }
    lengths = _length_bins(x for v in lines_by.values() for x in v)
    first = next(iter(lines_by.values()), [])
    summary: dict[str, Any] = {
        "questions": len({x["qid"] for x in first}),
        "answered": len({x["qid"] for v in answers_by.values() for x in v}),
        "model": next((x["model"] for v in answers_by.values() for x in v), None),
        "strategies": {n: {str(b): {m: mean_ci([v for (_, bb), v in sorted(per[m].get(n, {}).items()) if bb == b])
                                    for m in ("recall", "precision", "tokens", "answer_f1", "exact", "abstained")}
                           for b in budgets} for n in names},
        "vs_pcm": {m: comparisons(per[m], budgets) for m in (*DIALOGUE_METRICS, "tokens", "build_ms")},
        "strata": {
            "category": strata(lines_by, "recall", budgets, lambda x: str(x["category"])),
            "length": strata(lines_by, "recall", budgets, lambda x: lengths.get(int(x["conv_turns"])) if core(x) else None),
            "back": strata(lines_by, "recall", budgets, lambda x: _back_label(x.get("back")) if core(x) else None),
            "answer_category": strata(_ordered_map(answers_by), "f1", budgets, lambda x: str(x["category"])),
        },
        "efficiency": efficiency(lines_by, budgets),
        "latency": latency(lines_by, budgets),
        "identical_to_pcm": _identical(lines_by),
    }
    return summary, {"per": per}


def _ordered_map(by: Mapping[str, Any]) -> dict[str, Any]:
    return {n: by[n] for n in _ordered(by)}


def _identical(lines_by: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, float]:
    """Per strategy, the share of (question, budget) whose prompt is PCM's to the byte (an ablation
    whose mechanism these data never exercise)."""
    ref = {(x["qid"], x["budget"]): x["context"] for x in lines_by.get(PCM.name, [])}
    out = {}
    for name, lines in lines_by.items():
        if name != PCM.name and lines:
            out[name] = sum(ref.get((x["qid"], x["budget"])) == x["context"] for x in lines) / len(lines)
    return out


# --------------------------------------------------------------------------- streams and conflicts


def stream(folder: Path, budgets: Sequence[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The figures of one stream dataset: purity, thread recall, leak words, empty (new conversations)."""
    lines_by = _ordered_map(_files(folder))
    per = {m: {n: values_of(v, m, "id") for n, v in lines_by.items()} for m in (*STREAM_METRICS, "leak_words", "empty")}
    summary = {
        "messages": len({x["id"] for v in lines_by.values() for x in v}),
        "strategies": {n: {str(b): {m: mean_ci([v for (_, bb), v in sorted(per[m][n].items()) if bb == b])
                                    for m in per} for b in budgets} for n in lines_by},
        "vs_pcm": {m: comparisons(per[m], budgets) for m in STREAM_METRICS},
        "latency": latency(lines_by, budgets),
    }
    return summary, {"per": per}


def conflicts(folder: Path, budgets: Sequence[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Conflict exposure: per strategy and budget the share of each outcome, the exposed rate with
    its interval, and PCM against the others."""
    lines_by = _ordered_map(_files(folder))
    exposed = {n: {(x["id"], int(x["budget"])): float(x["outcome"] == "exposed") for x in v} for n, v in lines_by.items()}
    summary = {
        "items": len({x["id"] for v in lines_by.values() for x in v}),
        "strategies": {n: {str(b): {"exposed": mean_ci([v for (_, bb), v in sorted(exposed[n].items()) if bb == b]),
                                    "outcomes": {o: float(np.mean([x["outcome"] == o for x in v if x["budget"] == b]))
                                                 for o in OUTCOMES}} for b in budgets} for n, v in lines_by.items()},
        "vs_pcm": {"exposed": comparisons(exposed, budgets)},
    }
    return summary, {"per": {"exposed": exposed}}


# --------------------------------------------------------------------------- the whole


def summarize(pred: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``OUT/pred`` → (summary.json's content, the plots' series); see the module doc."""
    run = json.loads((pred / "run.json").read_text(encoding="utf-8"))
    budgets = [int(b) for b in run["plan"]["budgets"]]
    summary: dict[str, Any] = {"run": run, "strategies": {n: {"label": s.label, "kind": s.kind, "about": s.about}
                                                           for n, s in STRATEGIES.items()},
                               "dialogue": {}, "stream": {}, "conflicts": None}
    series: dict[str, Any] = {"dialogue": {}, "stream": {}, "conflicts": None}
    for data in run["datasets"]:
        name, kind = data["name"], data["kind"]
        part, points = (dialogue if kind == "dialogue" else stream)(pred / name, budgets)
        summary[kind][name], series[kind][name] = part, points
    if (pred / "conflicts").is_dir():
        summary["conflicts"], series["conflicts"] = conflicts(pred / "conflicts", budgets)
    summary["ablations"] = ablation_rows(summary, budgets)
    return _r(summary), series
