"""Held-out figures for a recall change: conversation-level folds over ``pcm eval recall`` runs.

A quality change is kept only when it gains on conversations its tuning never saw. With the
few conversations of a dev set (locomo-dev has three) the folds are leave-one-conversation-out:
each conversation in turn is the held-out half and the others the fitted half. Given the PRED
files of a run before a change and of one run after it (the same DIR, budgets and counter), this
prints, per fold, the recall of each budget on the fitted and the held-out half, before → after,
per question category at each budget on the held-out half, and whether the change gains on every
held-out conversation.

A weight or threshold is fitted the same way: run the evaluation once per grid point (``pcm eval
recall --tune NAME=W``) and give every run after BEFORE. Each fold then chooses the run with the
best mean overall recall on its fitted half (over the ``--fit-on`` budgets, default all; the
first given on a tie) and reports that run's figures on its held-out half, so a held-out figure
never comes from a choice that saw it. Scoring is ``app.eval.recall``'s ("overall" leaves the
adversarial questions out).

    python -m app.eval.folds DIR BEFORE.jsonl AFTER.jsonl [AFTER.jsonl ...] [--fit-on 512,1024] [--report FILE]
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


def run_names(paths: Sequence[Path]) -> list[str]:
    """A short name for each run: its file's stem, or its path when two stems are the same."""
    stems = [p.stem for p in paths]
    return [p.stem if stems.count(p.stem) == 1 else str(p) for p in paths]


def fold_report(data_dir: Path, before: Path, after: Sequence[Path], *,
                fit_on: Sequence[int] | None = None) -> dict[str, Any]:
    """Per held-out conversation: the run of ``after`` its fitted half chose (the best mean overall
    recall over the ``fit_on`` budgets, default all; the first on a tie) and both halves' figures
    before and with it."""
    _, questions, turns, _ = load_dataset(data_dir)
    gold = {q["qid"]: q["gold"] for q in questions}
    old = scores(before, gold, turns)
    names = run_names(after)
    runs = {name: scores(path, gold, turns) for name, path in zip(names, after, strict=True)}
    budgets = sorted(set.intersection({b for _, b in old}, *({b for _, b in got} for got in runs.values())))
    chosen_on = [b for b in (fit_on or budgets) if b in budgets] or budgets
    convs = sorted({q["conversation"] for q in questions})
    folds: dict[str, Any] = {}
    for held in convs:
        halves = {"held_out": [q for q in questions if q["conversation"] == held],
                  "fitted": [q for q in questions if q["conversation"] != held]}
        fitted = {name: figures(got, halves["fitted"], chosen_on) for name, got in runs.items()}
        choice = max(names, key=lambda n: (sum(fitted[n][b]["overall"] for b in chosen_on), -names.index(n)))
        folds[held] = {"chosen": choice} | {
            name: {"before": figures(old, qs, budgets), "after": figures(runs[choice], qs, budgets), "n": len(qs)}
            for name, qs in halves.items()}
    gains = {b: min(f["held_out"]["after"][b]["overall"] - f["held_out"]["before"][b]["overall"]
                    for f in folds.values()) for b in budgets}
    return {"budgets": budgets, "fit_on": chosen_on, "folds": folds, "before": figures(old, questions, budgets),
            "runs": {name: figures(got, questions, budgets) for name, got in runs.items()},
            "min_held_out_gain": gains}


def format_fold_report(report: Mapping[str, Any]) -> str:
    budgets = report["budgets"]
    several = len(report["runs"]) > 1
    width = max([24] + [len(f"all: {name}") + 1 for name in report["runs"] if several])
    head = "".join(f"{b:>16}" for b in budgets)
    lines = ["evidence recall, before -> after (overall = all categories but adversarial)", f"{'':{width}}{head}"]

    def row(label: str, before: Mapping[int, Any], after: Mapping[int, Any], key: str) -> str:
        cells = "".join(f"   {before[b].get(key, float('nan')):.3f} -> {after[b].get(key, float('nan')):.3f}"
                        for b in budgets)
        return f"{label:{width}}{cells}"

    for name, figs in report["runs"].items():
        lines.append(row(f"all: {name}" if several else "all conversations", report["before"], figs, "overall"))
    for held, fold in report["folds"].items():
        chose = (f"; chose {fold['chosen']} on {','.join(map(str, report['fit_on']))}") if several else ""
        lines.append(f"fold: {held} held out ({fold['held_out']['n']} questions; fitted on the other "
                     f"{fold['fitted']['n']}{chose})")
        for label, half in (("  fitted half", fold["fitted"]), ("  held-out half", fold["held_out"])):
            lines.append(row(label, half["before"], half["after"], "overall"))
        cats = sorted(k for k in fold["held_out"]["before"][budgets[0]] if k != "overall")
        lines.extend(row(f"    {cat}", fold["held_out"]["before"], fold["held_out"]["after"], cat) for cat in cats)
    lines.append(row_gain(report["min_held_out_gain"], budgets, width))
    return "\n".join(lines)


def row_gain(gains: Mapping[int, float], budgets: Sequence[int], width: int = 24) -> str:
    cells = "".join(f"{gains[b]:>+16.3f}" for b in budgets)
    return f"{'least held-out gain':{width}}{cells}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.eval.folds", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="the dataset folder the runs read (messages.jsonl, questions.jsonl)")
    parser.add_argument("before", help="PRED.jsonl of the run before the change")
    parser.add_argument("after", nargs="+", help="PRED.jsonl of the run after it, or of each grid point of a weight")
    parser.add_argument("--fit-on", metavar="BUDGETS",
                        help="with several runs after: the budgets whose mean recall a fold chooses by "
                             "(comma-separated; default all)")
    parser.add_argument("--report", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    try:
        fit_on = [int(b) for b in args.fit_on.split(",") if b.strip()] if args.fit_on else None
    except ValueError:
        print(f"folds: error: --fit-on must be comma-separated whole numbers, not {args.fit_on!r}", file=sys.stderr)
        return 2
    for path in (Path(args.before), *map(Path, args.after), Path(args.dir) / "questions.jsonl"):
        if not path.is_file():
            print(f"folds: error: {path} not found", file=sys.stderr)
            return 2
    report = fold_report(Path(args.dir), Path(args.before), [Path(a) for a in args.after], fit_on=fit_on)
    print(format_fold_report(report))
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
