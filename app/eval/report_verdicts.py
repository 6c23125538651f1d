"""Where PCM's gain comes from: one row per ablation, and the mechanisms that cost more than they give.

Each closed mechanism is judged on every paired comparison the report made of it against PCM: its
contribution (PCM − without it) to evidence recall and answer F1 (dialogue datasets), purity and
thread recall (streams), and conflict exposure (the generated set), at every budget. A
contribution is distinguishable from zero when its 95 % interval excludes zero and the paired
signed-rank test agrees (p < .05, ``stats.compare``). The row's verdict:

- ``helps``: at least one contribution above zero, none below;
- ``hurts``: at least one below zero, none above;
- ``mixed``: some above, some below;
- ``no measurable effect``: every interval holds zero, though the contexts changed;
- ``not exercised``: the contexts are the same as PCM's to the byte (the data never reach the
  mechanism: no task, no outside text, no environment event), so nothing is measured.

Its cost is what the mechanism adds to a build: the paired build-time difference (ms) and the
context tokens. A mechanism *costs more than it gives* when it hurts, or when it has no
measurable effect while costing build time or tokens (the interval of that cost above zero).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from app.eval.strategies import STRATEGIES

QUALITY = (("dialogue", "recall"), ("dialogue", "answer_f1"), ("stream", "purity"), ("stream", "thread_recall"))


def _cells(summary: Mapping[str, Any], name: str, budgets: Sequence[int]) -> Iterator[dict[str, Any]]:
    """Every paired comparison of PCM with ``name`` on a quality metric."""
    for kind, metric in QUALITY:
        for data, part in summary.get(kind, {}).items():
            row = part["vs_pcm"].get(metric, {}).get(name, {})
            for b in budgets:
                cell = row.get(str(b))
                if cell and cell.get("n"):
                    yield {"data": data, "metric": metric, "budget": b, **cell}
    part = summary.get("conflicts")
    if part:
        for b in budgets:
            cell = part["vs_pcm"]["exposed"].get(name, {}).get(str(b))
            if cell and cell.get("n"):
                yield {"data": "conflicts", "metric": "exposed", "budget": b, **cell}


def _cost(summary: Mapping[str, Any], name: str, budgets: Sequence[int]) -> dict[str, Any]:
    """The build time and tokens the mechanism adds (PCM − without it) per dialogue dataset and budget."""
    out: dict[str, Any] = {}
    for data, part in summary.get("dialogue", {}).items():
        for metric in ("build_ms", "tokens"):
            row = part["vs_pcm"].get(metric, {}).get(name, {})
            out.setdefault(data, {})[metric] = {str(b): row[str(b)] for b in budgets if str(b) in row}
    return out


def verdict(cells: Sequence[Mapping[str, Any]], identical: Sequence[float]) -> str:
    """The row's verdict from its comparisons (module doc); ``identical``: the shares of contexts
    equal to PCM's, per dialogue dataset."""
    helps = any(c["verdict"] == "better" for c in cells)
    hurts = any(c["verdict"] == "worse" for c in cells)
    if helps and hurts:
        return "mixed"
    if helps or hurts:
        return "helps" if helps else "hurts"
    if identical and all(share == 1.0 for share in identical) and all(c["diff"] == 0 for c in cells):
        return "not exercised"
    return "no measurable effect"


def _costly(cost: Mapping[str, Any]) -> list[str]:
    """What the mechanism costs with an interval above zero (``"build_ms@1024 +12.3"``)."""
    out = []
    for data, metrics in cost.items():
        for metric, row in metrics.items():
            for b, cell in row.items():
                if cell.get("low") is not None and cell["low"] > 0:
                    out.append(f"{data} {metric}@{b} {cell['diff']:+.1f}")
    return out


def ablation_rows(summary: Mapping[str, Any], budgets: Sequence[int]) -> list[dict[str, Any]]:
    """One row per ablation the report ran (module doc)."""
    rows = []
    for name, strategy in STRATEGIES.items():
        if strategy.kind != "ablation":
            continue
        cells = list(_cells(summary, name, budgets))
        identical = [part["identical_to_pcm"][name] for part in summary.get("dialogue", {}).values()
                     if name in part.get("identical_to_pcm", {})]
        if not cells and not identical:
            continue
        cost = _cost(summary, name, budgets)
        judged = verdict(cells, identical)
        costly = _costly(cost)
        rows.append({
            "strategy": name, "mechanism": strategy.ablate[0], "closes": strategy.about, "verdict": judged,
            "contributions": cells, "identical_to_pcm": identical, "cost": cost, "costs_without_gain": costly,
            "costs_more_than_it_gives": judged == "hurts" or (judged == "no measurable effect" and bool(costly)),
        })
    return rows
