"""The evaluation report's plots (matplotlib, Agg backend), as PNG bytes.

Each function draws one figure from the summary's figures (and the per-item series for the
distributions) and returns it as PNG bytes written without a timestamp or version, so the same
PRED files give the same bytes. matplotlib is the optional ``report`` extra (``pip install
-e .[report]``; the ``dev`` set has it too); it is imported only when a plot is drawn.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

COLORS = {"pcm": "#1f4e9c", "b1-full": "#9c9c9c", "b2-last-n": "#d08c2b", "b3-rag": "#3a9d5d"}
_DPI = 96


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "font.family": "DejaVu Sans"})
    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None}, bbox_inches="tight")
    _pyplot().close(fig)
    return buf.getvalue()


def curves(per: Mapping[str, Mapping[str, Mapping[str, Any]]], metric: str, budgets: Sequence[int],
           labels: Mapping[str, str], title: str, ylabel: str) -> bytes | None:
    """``metric`` against the budget for each strategy of ``per`` (strategy → budget → metric →
    {mean, low, high}), a band for its 95 % interval (a bar where a strategy has it at one budget
    only); None when no strategy has the metric."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    drawn = 0
    for n, (name, row) in enumerate(per.items()):
        points = [(b, c) for b in budgets if (c := row.get(str(b), {}).get(metric) or {}).get("mean") is not None]
        if not points:
            continue
        color = COLORS.get(name, f"C{n % 10}")
        xs, cells = [b for b, _ in points], [c for _, c in points]
        means, lows, highs = [c["mean"] for c in cells], [c["low"] for c in cells], [c["high"] for c in cells]
        ax.plot(xs, means, marker="o", color=color, label=labels.get(name, name), linewidth=2.2 if name == "pcm" else 1.4)
        if len(points) > 1:
            ax.fill_between(xs, lows, highs, color=color, alpha=0.15)
        else:
            ax.errorbar(xs, means, yerr=[[means[0] - lows[0]], [highs[0] - means[0]]], color=color, capsize=4)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(budgets), [str(b) for b in budgets])
    ax.set_xlabel("context budget (tokens, ceil(1.3 × words))")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    return _png(fig)


def deltas(rows: Sequence[tuple[str, Mapping[str, Mapping[str, Any]]]], budgets: Sequence[int], title: str,
           xlabel: str) -> bytes | None:
    """Horizontal bars: for each row (label, budget → {diff, low, high}) one bar per budget with its
    95 % interval; None without a row."""
    rows = [(label, cells) for label, cells in rows if any(cells.get(str(b)) for b in budgets)]
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 0.5 + 0.42 * len(rows) * max(1, len(budgets)) ** 0.5 + 0.6))
    height = 0.8 / max(1, len(budgets))
    for k, b in enumerate(budgets):
        ys, xs, lo, hi = [], [], [], []
        for i, (_, cells) in enumerate(rows):
            cell = cells.get(str(b))
            if cell and cell.get("diff") is not None:
                ys.append(i + (k - (len(budgets) - 1) / 2) * height)
                xs.append(cell["diff"])
                lo.append(cell["diff"] - cell["low"])
                hi.append(cell["high"] - cell["diff"])
        ax.barh(ys, xs, height=height, xerr=[lo, hi], color=f"C{k}", alpha=0.8, label=f"budget {b}",
                error_kw={"elinewidth": 1, "capsize": 2})
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    return _png(fig)


def distributions(values: Mapping[str, Sequence[float]], labels: Mapping[str, str], title: str,
                  xlabel: str) -> bytes | None:
    """A box plot per strategy (whiskers at the 5th and 95th percentiles), log scale."""
    names = [n for n, v in values.items() if v]
    if not names:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 0.6 + 0.32 * len(names)))
    ax.boxplot([list(values[n]) for n in names], orientation="horizontal", whis=(5, 95), showfliers=False,
               tick_labels=[labels.get(n, n) for n in names])
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    return _png(fig)


def outcome_bars(shares: Mapping[str, Mapping[str, float]], outcomes: Sequence[str], labels: Mapping[str, str],
                 title: str) -> bytes | None:
    """Stacked horizontal bars: per strategy the share of each outcome."""
    names = list(shares)
    if not names:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 0.8 + 0.32 * len(names)))
    left = [0.0] * len(names)
    palette = {"exposed": "#1f4e9c", "unordered": "#7fa7d9", "current": "#c9c9c9", "stale": "#d9534f",
               "neither": "#f0ad4e"}
    for outcome in outcomes:
        widths = [shares[n].get(outcome, 0.0) for n in names]
        ax.barh(range(len(names)), widths, left=left, color=palette.get(outcome), label=outcome)
        left = [a + w for a, w in zip(left, widths)]
    ax.set_yticks(range(len(names)), [labels.get(n, n) for n in names])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of items")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=len(outcomes), loc="lower center", bbox_to_anchor=(0.5, 1.08))
    return _png(fig)
