"""Progressive detail (issue 14 §3), the pure part: how expand, collapse and focus change the
detail a context carries, and the words of what cannot be done."""

from __future__ import annotations

import pytest

from app.core.pipeline.detail import Detail, DetailAction, DetailError, apply

PARTS = [{"first": 0, "last": 31}, {"first": 32, "last": 63}, {"first": 64, "last": 80}]
SHOWN = {"0-31": "brief", "32-63": "standard"}


def _do(detail: Detail, kind: str, **kw: object) -> Detail:
    return apply(detail, DetailAction(kind=kind, **kw), shown={**SHOWN, **detail.spans}, parts=PARTS)  # type: ignore[arg-type]


def test_expand_climbs_the_levels_to_the_raw_turns_and_collapse_comes_back_to_hidden() -> None:
    detail = Detail()
    seen = []
    for _ in range(3):
        detail = _do(detail, "expand", span="0-31")
        seen.append(detail.spans["0-31"])
    assert seen == ["standard", "detailed", "raw"]
    with pytest.raises(DetailError, match="already shown in full"):
        _do(detail, "expand", span="0-31")
    for _ in range(4):
        detail = _do(detail, "collapse", span="0-31")
    assert detail.spans["0-31"] == "hidden"
    with pytest.raises(DetailError, match="already left out"):
        _do(detail, "collapse", span="0-31")
    assert [a.kind for a in detail.actions] == ["expand"] * 3 + ["collapse"] * 4  # every step recorded


def test_collapsing_a_raw_turn_folds_its_part_or_moves_the_window_behind_the_summary() -> None:
    expanded = Detail(spans={"32-63": "raw"})
    folded = apply(expanded, DetailAction(kind="collapse", message_id="m40"), shown=SHOWN, parts=PARTS, message_index=40)
    assert folded.spans["32-63"] == "detailed" and folded.through is None  # an expanded part goes back
    window = apply(Detail(), DetailAction(kind="collapse", message_id="m70"), shown=SHOWN, parts=PARTS, message_index=70)
    assert window.through == 80  # the whole part covering the turn is carried by the summary
    with pytest.raises(DetailError, match="No summary covers this turn yet"):
        apply(Detail(), DetailAction(kind="collapse", message_id="m99"), shown=SHOWN, parts=PARTS, message_index=99)
    with pytest.raises(DetailError, match="not in this context"):
        apply(Detail(), DetailAction(kind="collapse", message_id="x"), shown=SHOWN, parts=PARTS)


def test_focus_sets_and_clears_a_second_subject_and_unknown_parts_are_refused() -> None:
    focused = _do(Detail(), "focus", node_id="n7")
    assert focused.focus == "n7" and not focused.empty()
    assert _do(focused, "focus", node_id=None).focus is None
    with pytest.raises(DetailError, match="No summary of turns 5-9"):
        _do(Detail(), "expand", span="5-9")
