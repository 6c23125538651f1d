"""Progressive detail in the Context tab, on a real turn record: 100 history messages ingested
into a session on the real Engine (SQLite + LanceDB, the scripted model and hash embedder) and
summarized, then a question asked on the end of that branch, so that its context carries a summary
block (three parts, "turns:a-b" refs) and the branch's last turns raw; and another branch.

The Detail row offers the selected block's parts, emits the ``DetailAction`` the user chose and
says what is set; the window end to end: tests/ui/test_detail_window.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from app.core.pipeline.builder import NEW_ROOT
from app.core.pipeline.detail import DetailAction
from app.core.pipeline.record import TurnRecord
from app.core.types import BlockType
from app.ui.panels.context_tab import ContextTabWidget
from app.ui.panels.detail_row import NO_PARTS, block_parts
from tests.conftest import engine_in
from tests.texts import step_history as history

QUESTION = "Where is the parser kept?"


@dataclass
class Asked:
    record: TurnRecord
    garden_node: str  # the last turn of another branch


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> Asked:
    engine = engine_in(tmp_path_factory.mktemp("detail-session"), ["Noted."], budget=1200)

    async def main() -> Asked:
        await engine.start()
        state = await engine.open_session(None, title="detail")
        sid = state.session_id
        await engine.ingest(sid, history(100))
        await engine.summarize(sid)
        end = state.node_of(state.turn_order[-1])
        garden = await (await engine.submit(sid, "Separately: the garden needs 12 tulips.", anchor_override=NEW_ROOT)).done
        record = await (await engine.submit(sid, QUESTION, anchor_override=end)).done
        await engine.close()
        return Asked(record, state.node_of(garden.turn_id) or "")

    return asyncio.run(main())


@pytest.fixture
def tab(qtbot, asked: Asked) -> ContextTabWidget:
    widget = ContextTabWidget()
    qtbot.addWidget(widget)
    widget.resize(520, 900)
    widget.label_lookup = lambda node: "Garden" if node == asked.garden_node else ""
    widget.branch_lookup = lambda _record: [(asked.garden_node, "Garden (1 turn)")]
    widget.show()
    qtbot.waitExposed(widget)
    widget.show_record(asked.record)
    return widget


def _row_of(tab: ContextTabWidget, kind: BlockType) -> int:
    return [b.block_type for b in tab._record.build.context.blocks].index(kind)


def _items(tab: ContextTabWidget) -> list[str]:
    return [tab.detail.parts.itemText(i) for i in range(tab.detail.parts.count())]


def test_the_record_has_a_summary_block_and_raw_turns(asked: Asked) -> None:
    kinds = {b.block_type: b for b in asked.record.build.context.blocks}
    assert [r.selector for r in kinds[BlockType.SUMMARY].refs] == ["turns:0-31", "turns:32-63", "turns:64-95"]
    assert len(kinds[BlockType.CONVERSATION].refs) >= 2 and asked.record.build.detail == {}


def test_a_summary_block_offers_its_parts_and_more_or_less_detail_asks_for_them(qtbot, tab: ContextTabWidget,
                                                                                 asked: Asked) -> None:
    row = tab.detail
    tab.blocks.setCurrentCell(_row_of(tab, BlockType.SUMMARY), 0)
    level = asked.record.build.plan["history"]["summary_level"]
    assert level in ("brief", "standard", "detailed")
    labels = _items(tab)
    assert labels[0].startswith("Summary of turns 0-31 (") and labels[-1] == f"Summary of turns 64-95 ({level})"
    assert [row.parts.itemData(i) for i in range(row.parts.count())] == ["0-31", "32-63", "64-95"]
    row.parts.setCurrentIndex(1)
    assert row.more.isEnabled() and row.less.isEnabled()
    with qtbot.waitSignal(tab.detail_requested) as more:
        row.more.click()
    assert more.args == [asked.record.turn_id, DetailAction(kind="expand", span="32-63")]
    with qtbot.waitSignal(tab.detail_requested) as less:
        row.less.click()
    assert less.args == [asked.record.turn_id, DetailAction(kind="collapse", span="32-63")]
    assert row.said.text() == "Nothing set: the context is as it was built."
    assert "same budget" in row.hint.text() and "Answer again" in row.hint.text()


def test_a_conversation_block_offers_its_turns_which_can_only_lose_detail(qtbot, tab: ContextTabWidget,
                                                                           asked: Asked) -> None:
    block = next(b for b in asked.record.build.context.blocks if b.block_type == BlockType.CONVERSATION)
    tab.blocks.setCurrentCell(_row_of(tab, BlockType.CONVERSATION), 0)
    row = tab.detail
    labels = _items(tab)
    assert len(labels) == len(block.refs)
    assert labels[-1] == block.content.split("\n")[-1][:55].rstrip() + "…"  # the start of its line
    assert not row.more.isEnabled() and row.less.isEnabled()  # a turn is already in full
    with qtbot.waitSignal(tab.detail_requested) as less:
        row.less.click()
    assert less.args == [asked.record.turn_id, DetailAction(kind="collapse", message_id=block.refs[0].evidence_id)]
    # lines that do not map one to one onto the refs: the turns are named by a short id
    joined = block.model_copy(update={"content": "This branch so far:\none line for all"})
    assert [p.label for p in block_parts(joined, {})] == [f"Turn {r.evidence_id[:8]}" for r in block.refs]


def test_a_block_without_parts_says_so_and_a_branch_can_be_brought_in(qtbot, tab: ContextTabWidget,
                                                                        asked: Asked) -> None:
    tab.blocks.setCurrentCell(_row_of(tab, BlockType.EVIDENCE), 0)
    row = tab.detail
    assert _items(tab) == [NO_PARTS] and not row.parts.isEnabled()
    assert not row.more.isEnabled() and not row.less.isEnabled()
    assert row.branches.currentText() == "Garden (1 turn)" and not row.take_out.isVisible()
    with qtbot.waitSignal(tab.detail_requested) as bring:
        row.bring.click()
    assert bring.args == [asked.record.turn_id, DetailAction(kind="focus", node_id=asked.garden_node)]


def test_what_is_set_is_said_and_parts_no_line_shows_can_still_change(qtbot, tab: ContextTabWidget,
                                                                        asked: Asked) -> None:
    detail = {"spans": {"0-31": "raw", "32-63": "hidden", "64-95": "detailed"}, "through": 97,
              "focus": asked.garden_node}
    build = asked.record.build
    # as recompiled: no summary line is left (one part raw, one left out, one too long for the budget)
    context = build.context.model_copy(update={"blocks": [b for b in build.context.blocks
                                                          if b.block_type != BlockType.SUMMARY]})
    record = asked.record.model_copy(update={"build": build.model_copy(update={"detail": detail, "context": context})})
    tab.show_record(record)
    row = tab.detail
    assert row.said.text() == ("You set: turns 0-31 shown in full; turns 32-63 left out; turns 64-95 summarized "
                               "in detail (did not fit the budget); turns up to 97 folded into the summary; "
                               "the branch “Garden” brought in.")
    assert row.take_out.isVisible()
    tab.blocks.setCurrentCell(_row_of(tab, BlockType.EVIDENCE), 0)
    assert _items(tab) == ["Summary of turns 32-63 (left out)",  # in no block: offered with any
                           "Summary of turns 64-95 (detailed, did not fit the budget)"]
    assert row.more.isEnabled() and not row.less.isEnabled()  # nothing is coarser than left out
    with qtbot.waitSignal(tab.detail_requested) as more:
        row.more.click()
    assert more.args[1] == DetailAction(kind="expand", span="32-63")
    row.parts.setCurrentIndex(1)
    assert row.more.isEnabled() and row.less.isEnabled()
    with qtbot.waitSignal(tab.detail_requested) as out:
        row.take_out.click()
    assert out.args[1] == DetailAction(kind="focus", node_id=None)
    tab.show_record(None)
    assert not row.isVisible() and not tab.detail_title.isVisible()
