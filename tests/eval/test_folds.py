"""Leave-one-conversation-out figures of two recall runs (app/eval/folds.py)."""

from __future__ import annotations

import json
from pathlib import Path

from app.eval.folds import fold_report, format_fold_report, main

MESSAGES = [{"id": f"{c}/D1:{n}", "conversation": c, "text": f"turn {c} number {n} about things", "author": "a",
             "ts": "2023-01-01T10:00:00"} for c in ("c1", "c2") for n in (1, 2)]
QUESTIONS = [{"qid": "c1#0", "conversation": "c1", "question": "?", "gold": ["c1/D1:1"], "category": "temporal"},
             {"qid": "c1#1", "conversation": "c1", "question": "?", "gold": ["c1/D1:2"], "category": "adversarial"},
             {"qid": "c2#0", "conversation": "c2", "question": "?", "gold": ["c2/D1:1", "c2/D1:2"],
              "category": "multi-hop"}]


def _write(path: Path, rows: list[dict]) -> Path:  # type: ignore[type-arg]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _pred(path: Path, cited: dict[str, list[str]]) -> Path:
    text = {m["id"]: m["text"] for m in MESSAGES}
    return _write(path, [{"qid": q, "budget": 512, "blocks": [
        {"content": " ".join(text[i] for i in ids), "source_ids": ids}]} for q, ids in cited.items()])


def test_each_conversation_is_held_out_in_turn(tmp_path: Path) -> None:
    _write(tmp_path / "messages.jsonl", MESSAGES)
    _write(tmp_path / "questions.jsonl", QUESTIONS)
    before = _pred(tmp_path / "before.jsonl", {"c1#0": [], "c1#1": [], "c2#0": ["c2/D1:1"]})
    after = _pred(tmp_path / "after.jsonl", {"c1#0": ["c1/D1:1"], "c1#1": [], "c2#0": ["c2/D1:1"]})
    report = fold_report(tmp_path, before, [after])
    c1 = report["folds"]["c1"]
    assert c1["held_out"]["n"] == 2 and c1["fitted"]["n"] == 1
    assert (c1["held_out"]["before"][512]["overall"], c1["held_out"]["after"][512]["overall"]) == (0.0, 1.0)
    assert report["folds"]["c2"]["held_out"]["after"][512] == {"multi-hop": 0.5, "overall": 0.5}
    assert report["min_held_out_gain"] == {512: 0.0}  # c2 held out gains nothing
    assert report["runs"]["after"][512]["overall"] == 0.75  # the adversarial question is apart
    assert "fold: c1 held out" in format_fold_report(report)
    assert main([str(tmp_path), str(before), str(tmp_path / "missing.jsonl")]) == 2


def test_with_a_grid_each_fold_reports_the_run_its_fitted_half_chose(tmp_path: Path) -> None:
    """Three conversations; grid point "wide" helps c1 and c3 but costs c2, "narrow" helps c2 only.
    Each fold chooses on the other two conversations and is read on its own."""
    messages = [{"id": f"{c}/D1:{n}", "conversation": c, "text": f"turn {c} {n}", "author": "a",
                 "ts": "2023-01-01T10:00:00"} for c in ("c1", "c2", "c3") for n in (1, 2)]
    questions = [{"qid": f"{c}#0", "conversation": c, "question": "?", "gold": [f"{c}/D1:1"], "category": "single-hop"}
                 for c in ("c1", "c2", "c3")]
    _write(tmp_path / "messages.jsonl", messages)
    _write(tmp_path / "questions.jsonl", questions)
    text = {m["id"]: m["text"] for m in messages}

    def pred(name: str, hits: dict[str, dict[int, bool]]) -> Path:
        return _write(tmp_path / f"{name}.jsonl", [
            {"qid": f"{c}#0", "budget": b, "blocks": [{"content": text[f"{c}/D1:1"], "source_ids": [f"{c}/D1:1"]}]
             if hit else []} for c, by in hits.items() for b, hit in by.items()])

    before = pred("before", {"c1": {512: False, 1024: True}, "c2": {512: True, 1024: True},
                             "c3": {512: False, 1024: False}})
    wide = pred("wide", {"c1": {512: True, 1024: True}, "c2": {512: False, 1024: True},
                         "c3": {512: True, 1024: False}})
    narrow = pred("narrow", {"c1": {512: False, 1024: True}, "c2": {512: True, 1024: True},
                             "c3": {512: False, 1024: True}})
    report = fold_report(tmp_path, before, [wide, narrow])
    assert {held: fold["chosen"] for held, fold in report["folds"].items()} == {"c1": "narrow", "c2": "wide",
                                                                              "c3": "wide"}
    # c2 held out: "wide" was chosen on c1 and c3, and it loses c2's answer at 512
    assert report["folds"]["c2"]["held_out"]["after"][512]["overall"] == 0.0
    assert report["min_held_out_gain"] == {512: -1.0, 1024: 0.0}
    # choosing by 1024 alone: c1 and c3 prefer "narrow" (a tie on c1 goes to the first given)
    by_1024 = fold_report(tmp_path, before, [wide, narrow], fit_on=[1024])
    assert by_1024["folds"]["c2"]["chosen"] == "narrow" and by_1024["fit_on"] == [1024]
    assert "chose narrow on 1024" in format_fold_report(by_1024)
    assert main([str(tmp_path), str(before), str(wide), str(narrow), "--fit-on", "512,x"]) == 2
