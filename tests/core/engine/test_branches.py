"""The pure parts of the branch actions: a turn's override timeline and the undo stack."""

from __future__ import annotations

from typing import Any

from app.core.engine.branches import undo_target
from app.core.pipeline.record import BuildRecord, TurnRevision
from app.core.session.state import Override, OverrideSpan, override_spans


def _build(override: str | None) -> dict[str, Any]:
    return {"text": "receipts for seeds", "routing": {"override": override}}


def test_override_timeline_follows_the_revisions() -> None:
    # Submitted onto "a" at seq 2; re-anchored to "b" when 4 turns existed; a new root at 6
    # (NEW_ROOT: no node to lean towards); undone at 7, back to "b".
    builds = [_build("a"), _build("b"), _build(""), _build("b")]
    record = {"build": builds[-1], "revisions": [
        {"at_seq": 4, "build": builds[0]}, {"at_seq": 6, "build": builds[1]}, {"at_seq": 7, "build": builds[2]}]}
    spans = override_spans("t", 2, record)
    text = "receipts for seeds"
    assert spans == [
        OverrideSpan(Override(2, text, "a"), "t", until=4),
        OverrideSpan(Override(3, text, "b"), "t", until=6),
        OverrideSpan(Override(6, text, "b"), "t", until=None),
    ]
    seen = {seq: [s.override.node for s in spans if s.visible_at(seq)] for seq in range(2, 9)}
    assert seen == {2: [], 3: ["a"], 4: ["b"], 5: ["b"], 6: [], 7: ["b"], 8: ["b"]}
    assert override_spans("t", 2, {"build": _build(None)}) == []


def test_undo_pops_reanchors_like_a_stack() -> None:
    build = BuildRecord.model_construct()

    def rev(kind: str) -> TurnRevision:
        return TurnRevision.model_construct(kind=kind, build=build)

    assert undo_target([]) is None
    assert undo_target([rev("reanchor"), rev("reanchor")]) == 1
    assert undo_target([rev("reanchor"), rev("reanchor"), rev("undo")]) == 0
    assert undo_target([rev("reanchor"), rev("undo")]) is None
    assert undo_target([rev("reanchor"), rev("undo"), rev("reanchor")]) == 2
