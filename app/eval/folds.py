"""Held-out figures for a recall change: conversation-level folds over two ``pcm eval recall`` runs.

A quality change is kept only when it gains on conversations its tuning never saw. With the
few conversations of a dev set (locomo-dev has three) the folds are leave-one-conversation-out:
each conversation in turn is the held-out half and the others the fitted half. Given the PRED
files of a run before and after a change (the same DIR, budgets and counter), this prints, per
fold, the recall of each budget on the fitted and the held-out half, before → after, per
question category at each budget on the held-out half, and whether the change gains on every
held-out conversation. A weight or threshold is then fitted on a fold's fitted half and read on
its held-out half. Scoring is ``app.eval.recall``'s ("overall" leaves the adversarial
questions out).

    python -m app.eval.folds DIR BEFORE.jsonl AFTER.jsonl [--report FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.eval.recall import load_dataset, load_jsonl, recalled, summarize

#: (qid, budget) → recall of that context.
Scores = dict[tuple[str, int], float]


def scores(pred: Path, gold: Mapping[str, list[str]], turns: dict[str, str]) -> Scores:
    """Each context's evidence recall, by (qid, budget)."""
    return {(r["qid"], int(r["budget"])): recalled(r["blocks"], gold[r["qid"]], turns)
            for r in load_jsonl(pred) if r["qid"] in gold}


def figures(got: Scores, questions: Sequence[dict[str, Any]], budgets: Sequence[int]) -> dict[int, dict[str, float]]:
    """Per budget: each category's mean recall and the overall one, over ``questions``."""
    return {b: summarize([(q["category"], got[(q["qid"], b)]) for q in questions if (q["qid"], b) in got])
            for b in budgets}


def fold_report(data_dir: Path, before: Path, after: Path) -> dict[str, Any]:
    """Per held-out conversation: the fitted and held-out halves' figures before and after."""
    _, questions, turns, _ = load_dataset(data_dir)
    gold = {q["qid"]: q["gold"] for q in questions}
    old, new = scores(before, gold, turns), scores(after, gold, turns)
    budgets = sorted({b for _, b in old} & {b for _, b in new})
    convs = sorted({q["conversation"] for q in questions})
    folds: dict[str, Any] = {}
    for held in convs:
        halves = {"held_out": [q for q in questions if q["conversation"] == held],
                  "fitted": [q for q in questions if q["conversation"] != held]}
        folds[held] = {name: {"before": figures(old, qs, budgets), "after": figures(new, qs, budgets), "n": len(qs)}
                       for name, qs in halves.items()}
    gains = {b: min(f["held_out"]["after"][b]["overall"] - f["held_out"]["before"][b]["overall"]
                    for f in folds.values()) for b in budgets}
    return {"budgets": budgets, "folds": folds, "all": {"before": figures(old, questions, budgets),
                                                        "after": figures(new, questions, budgets)},
            "min_held_out_gain": gains}


def format_fold_report(report: Mapping[str, Any]) -> str:
    budgets = report["budgets"]
    head = "".join(f"{b:>16}" for b in budgets)
    lines = ["evidence recall, before -> after (overall = all categories but adversarial)", f"{'':24}{head}"]

    def row(label: str, half: Mapping[str, Any], key: str) -> str:
        cells = "".join(f"   {half['before'][b].get(key, float('nan')):.3f} -> {half['after'][b].get(key, float('nan')):.3f}"
                        for b in budgets)
        return f"{label:24}{cells}"

    lines.append(row("all conversations", report["all"], "overall"))
    for held, fold in report["folds"].items():
        lines.append(f"fold: {held} held out ({fold['held_out']['n']} questions; fitted on the other "
                     f"{fold['fitted']['n']})")
        lines.append(row("  fitted half", fold["fitted"], "overall"))
        lines.append(row("  held-out half", fold["held_out"], "overall"))
        cats = sorted(k for k in fold["held_out"]["before"][budgets[0]] if k != "overall")
        lines.extend(row(f"    {cat}", fold["held_out"], cat) for cat in cats)
    lines.append(row_gain(report["min_held_out_gain"], budgets))
    return "\n".join(lines)


def row_gain(gains: Mapping[int, float], budgets: Sequence[int]) -> str:
    cells = "".join(f"{gains[b]:>+16.3f}" for b in budgets)
    return f"{'least held-out gain':24}{cells}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.eval.folds", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="the dataset folder both runs read (messages.jsonl, questions.jsonl)")
    parser.add_argument("before", help="PRED.jsonl of the run before the change")
    parser.add_argument("after", help="PRED.jsonl of the run after it")
    parser.add_argument("--report", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    for path in (Path(args.before), Path(args.after), Path(args.dir) / "questions.jsonl"):
        if not path.is_file():
            print(f"folds: error: {path} not found", file=sys.stderr)
            return 2
    report = fold_report(Path(args.dir), Path(args.before), Path(args.after))
    print(format_fold_report(report))
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
