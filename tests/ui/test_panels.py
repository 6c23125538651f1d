"""The inspector and turn panels on a real turn record: a six-turn session run through the real
Engine (SQLite + LanceDB) with the scripted chat model and the hash embedder.

The last turn's record has everything the tabs show: an LLM intent signal that answered, a plan
with rejected candidates, kept and not-kept recall candidates, a conflict (two deadlines), an
evidence line dropped by the budget, and an answer citing [1], [2], the dropped [3] and a
non-existent [9]. Expected values are read from the record or from the store, never hard-coded.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractItemView, QTableWidget, QTreeWidgetItem

from app.core.pipeline.record import TurnRecord
from app.ui.panels.citations import citation_map, context_lines, split_citations
from app.ui.panels.context_tab import SegmentBar, prompt_text
from app.ui.panels.inspector import InspectorPanel
from app.ui.panels.plain import MODE_WORDS
from app.ui.panels.plan_tab import FAMILIES
from app.ui.panels.timing_tab import tokens_per_second
from app.ui.panels.widgets import MeterWidget, fit_height, fmt_ms, make_table
from tests.conftest import engine_in

INPUTS = [
    "I prefer the blue theme for the website",
    "my deadline is Friday for the website launch",
    "The parser fails on empty input, I need to fix parser.py",
    "my deadline is Monday now",
    "Garden: plant tomatoes and basil in May",
    "What is the deadline and which theme for the website?",
]
LLM_INTENT = '{"mode": "qa", "task_type": "retrieval", "goal": "recall the deadline and the theme"}'
ANSWER = "The deadline moved from Friday [1] to Monday [2]; the garden [3] is unrelated. See also [9]."


@dataclass
class Session:
    record: TurnRecord
    message_ids: dict[str, str]  # message text → message id (from the store)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    tmp = tmp_path_factory.mktemp("inspector-session")
    replies: list[str] = []
    for _ in INPUTS:
        replies += [LLM_INTENT, "Noted."]
    replies[-1] = ANSWER
    engine = engine_in(tmp, replies, budget=150, llm_intent="auto")  # module scope: no make_engine
    engine._ctx.config.llm_intent_below = 1.01  # always ask the LLM, so its signal is in the record
    engine._memory.enabled = False  # these panels are read on turns and messages (tests/ui/test_memory_panel.py: memory)

    async def main() -> Session:
        await engine.start()
        state = await engine.open_session(None, title="inspector")
        records = [await (await engine.submit(state.session_id, text)).done for text in INPUTS]
        messages = await engine._ctx.ex.run("store", engine._ctx.store.list_messages, state.session_id)
        await engine.close()
        return Session(records[-1], {m.content: m.message_id for m in messages})

    return asyncio.run(main())


@pytest.fixture
def panel(qtbot, session: Session) -> InspectorPanel:
    widget = InspectorPanel()
    qtbot.addWidget(widget)
    widget.resize(1100, 900)
    widget.show()
    qtbot.waitExposed(widget)
    widget.show_record(session.record)
    return widget


def _cells(table: QTableWidget, column: int) -> list[str]:
    return [table.item(r, column).text() if table.item(r, column) else "" for r in range(table.rowCount())]


def _column(table: QTableWidget, title: str) -> int:
    for c in range(table.columnCount()):
        if table.horizontalHeaderItem(c).text() == title:
            return c
    raise AssertionError(f"no column {title!r}")


def _prompt_number(record: TurnRecord, text: str) -> int:
    """The [n] of the evidence line showing ``text`` in the prompt as sent."""
    match = re.search(r"^\[(\d+)\] user: " + re.escape(text) + "$", record.build.prompt[0]["content"], re.MULTILINE)
    assert match, f"{text!r} is not an evidence line of the prompt"
    return int(match.group(1))


# ---------------------------------------------------------------------- the record has what we test


def test_the_session_produced_a_record_rich_enough(session: Session) -> None:
    b = session.record.build
    assert b.llm_intent["status"] == "ok"
    assert any(c.kept for c in b.recall.candidates) and any(not c.kept for c in b.recall.candidates)
    assert b.context.dropped and b.context.conflicts
    assert session.record.output == ANSWER


# ---------------------------------------------------------------------- empty state


def test_empty_state_says_what_to_do_and_a_record_replaces_it(qtbot, session: Session) -> None:
    panel = InspectorPanel()
    qtbot.addWidget(panel)
    assert panel.stack.currentWidget() is panel.empty
    assert "Select a turn on the canvas" in panel.empty.text()
    assert "Select a turn on the canvas" in panel.turn.empty.text()
    panel.show_record(session.record)
    assert panel.stack.currentWidget() is panel.tabs
    assert [panel.tabs.tabText(i) for i in range(panel.tabs.count())] == list(InspectorPanel.TAB_TITLES)
    panel.show_record(None)
    assert panel.stack.currentWidget() is panel.empty and panel.record is None


# ---------------------------------------------------------------------- intent


def test_intent_tab_shows_every_field_with_confidence_and_the_llm_signal(panel: InspectorPanel, session: Session) -> None:
    intent = session.record.build.intent
    tab = panel.intent
    fields = _cells(tab.fields, 0)
    row = fields.index("mode")
    assert tab.fields.item(row, 1).text() == intent["mode"]
    meter = tab.fields.cellWidget(row, 2)
    assert isinstance(meter, MeterWidget) and meter.value == pytest.approx(intent["confidence"]["mode"])
    assert tab.fields.item(row, 2).text() == f"{intent['confidence']['mode']:.0%}"
    goal = fields.index("goal")
    assert tab.fields.item(goal, 1).text() == intent["goal"]
    assert tab.fields.cellWidget(goal, 2).value == pytest.approx(intent["confidence"]["goal"])
    for name in ("urgency", "risk", "needs_clarification", "sub_questions"):
        assert name in fields
    reasons = intent["uncertainty_reasons"]
    assert all(r in tab.reasons.text() for r in reasons) if reasons else "None" in tab.reasons.text()
    # LLM side by side with rules + embeddings
    assert "ok" in tab.llm_status.text()
    compare = {tab.compare.item(r, 0).text(): r for r in range(tab.compare.rowCount())}
    assert tab.compare.item(compare["mode"], 2).text() == "qa"
    assert tab.compare.item(compare["goal"], 2).text() == "recall the deadline and the theme"
    assert tab.compare.item(compare["mode"], 1).text().startswith(intent["mode"])
    assert "recall the deadline and the theme" in tab.llm_output.toPlainText()
    # every signal contribution of the record is in the signals table
    llm_col = _column(tab.signals, "llm")
    llm_rows = [r for r in range(tab.signals.rowCount()) if tab.signals.item(r, llm_col).text()]
    llm_signals = [s for s in intent["signals"] if s["name"] == "llm"]
    assert len(llm_rows) == len(llm_signals) > 0


# ---------------------------------------------------------------------- plan


def _find(item: QTreeWidgetItem, text: str) -> QTreeWidgetItem | None:
    for i in range(item.childCount()):
        child = item.child(i)
        if child.text(0) == text:
            return child
        found = _find(child, text)
        if found is not None:
            return found
    return None


def test_plan_tab_groups_fields_by_family_with_budget_per_segment_and_rejected_plans(
    panel: InspectorPanel, session: Session
) -> None:
    plan = session.record.build.plan
    tree = panel.plan.tree
    tops = [tree.topLevelItem(i).text(0) for i in range(tree.topLevelItemCount())]
    assert tops[: len(FAMILIES)] == [name for name, _ in FAMILIES]
    budget = next(tree.topLevelItem(i) for i in range(tree.topLevelItemCount()) if tree.topLevelItem(i).text(0) == "Budget & latency")
    segments = _find(budget, "tokens per segment")
    assert segments is not None
    used = session.record.build.context.segments
    shown = {segments.child(i).text(0): segments.child(i).text(1) for i in range(segments.childCount())}
    assert shown == {name: f"{quota} planned · {used[name].used} used" for name, quota in plan["budget"]["segments"].items()}
    total = _find(budget, "total_tokens")
    assert total is not None and total.text(1) == str(plan["budget"]["total_tokens"])
    tools = next(tree.topLevelItem(i) for i in range(tree.topLevelItemCount()) if tree.topLevelItem(i).text(0) == "Tool policy")
    offered = _find(tools, "offered")
    assert offered is not None and _find(tools, "blocked") is not None and _find(tools, "left out") is not None
    assert [offered.child(i).text(0) for i in range(offered.childCount())] == plan["tools"]["allowed"]
    rerank = next(tree.topLevelItem(i) for i in range(tree.topLevelItemCount()) if tree.topLevelItem(i).text(0) == "Rerank & crop")
    assert _find(rerank, "top_k").text(1) == str(plan["rerank"]["top_k"])
    # candidates: the chosen one first, the rejected ones with their reasons
    table = panel.plan.candidates
    candidates = session.record.build.plan_candidates
    assert table.rowCount() == len(candidates)
    chosen = next(c for c in candidates if c["chosen"])
    assert table.item(0, 0).text() == chosen["candidate_id"] == plan["candidate_id"]
    why = _column(table, "Why")
    rejected = {c["candidate_id"]: c["reason"] for c in candidates if not c["chosen"]}
    assert {table.item(r, 0).text(): table.item(r, why).text() for r in range(1, table.rowCount())} == rejected


JARGON = ("band", "candidate_pool", "top_k", "tight", "balanced", "relevance_threshold", "mmr", "segment", "qa")


def test_plan_and_intent_tabs_say_what_was_decided_in_plain_words_first(panel: InspectorPanel, session: Session) -> None:
    plan, intent = session.record.build.plan, session.record.build.intent
    for tab in (panel.plan, panel.intent):
        words = set(re.findall(r"[a-z_]+", tab.summary.text().lower()))
        assert tab.summary.text() and not words & set(JARGON), tab.summary.text()
        assert tab.summary.textFormat() == Qt.TextFormat.PlainText
        assert tab.details.body.isHidden()  # the fields wait under "Details"
        tab.details.button.click()
        assert not tab.details.body.isHidden() and tab.details.button.text() == "Details ▾"
        tab.details.button.click()
    said = panel.plan.summary.text()
    assert f"at most {plan['rerank']['top_k']} pieces of evidence" in said
    assert f"of {plan['budget']['total_tokens']:,} tokens" in said
    assert f"{session.record.build.context.tokens:,} of" in said
    assert panel.intent.summary.text().startswith("The app took this as a question") == (intent["mode"] == "qa")


# ---------------------------------------------------------------------- evidence


def test_the_turn_header_names_the_anchor_and_the_intent_in_words(panel: InspectorPanel, session: Session) -> None:
    b = session.record.build
    header = panel.turn.header.text()
    assert f"· {MODE_WORDS[b.intent['mode']]}" in header and f"{b.intent['mode']} /" not in header
    assert b.anchor_node and b.anchor_node[:8] in header  # no label source: the short id
    panel.turn.label_of = {b.anchor_node: "Plan the <b>Q3</b> budget"}.get
    panel.show_record(session.record)
    assert "continues «Plan the &lt;b&gt;Q3&lt;/b&gt; budget»" in panel.turn.header.text()  # the user's text, as text


def test_evidence_tab_lists_kept_and_dropped_candidates_with_reasons(panel: InspectorPanel, session: Session) -> None:
    recall = session.record.build.recall
    table = panel.evidence.candidates
    assert table.rowCount() == len(recall.candidates)
    id_col, kept_col, reason_col = _column(table, "Id"), _column(table, "Kept"), _column(table, "Reason")
    rows = {table.item(r, id_col).toolTip(): r for r in range(table.rowCount())}
    kept = next(c for c in recall.candidates if c.kept)
    not_kept = next(c for c in recall.candidates if not c.kept)
    assert table.item(rows[kept.id], kept_col).text() == "✓"
    assert table.item(rows[kept.id], reason_col).text() == kept.reason
    assert table.item(rows[not_kept.id], kept_col).text() == "✗"
    assert table.item(rows[not_kept.id], reason_col).text() == not_kept.reason != "kept"
    gated = next(c for c in recall.candidates if c.reason.startswith("below relevance threshold"))
    assert table.item(rows[gated.id], reason_col).text() == gated.reason  # the gate's drop reason shows
    graded = [c for c in recall.candidates if c.grade is not None]
    assert graded and all(table.item(rows[c.id], _column(table, "Grade")).text() == f"{c.grade:.2f}" for c in graded)
    # a candidate too far below the best for any support to lift it has no grade measured; its reason says so
    assert all(table.item(rows[c.id], _column(table, "Grade")).text() == "" for c in recall.candidates
               if c.grade is None and "whatever its support" in c.reason)
    gate = recall.gate
    said = panel.evidence.summary.text()  # in plain words, the user's query quoted as text
    assert f"{gate.passed} of {gate.graded} were relevant enough to use (relevance bar {gate.threshold:.2f})" in said
    assert f"found {len(recall.candidates)} passage" in said and panel.evidence.summary.textFormat() == Qt.TextFormat.PlainText
    vector = _column(table, "vector")
    hit = kept.channels["vector"]
    assert table.item(rows[kept.id], vector).text() == f"#{hit.rank} · {hit.score:.3f}"
    monday = session.message_ids["my deadline is Monday now"]
    assert table.item(rows[monday], _column(table, "Text")).text() == "user: my deadline is Monday now"
    # sorting by the fused score sorts numerically
    fused = _column(table, "Fused")
    table.sortItems(fused, Qt.SortOrder.DescendingOrder)
    values = [float(v) for v in _cells(table, fused)]
    assert values == sorted(values, reverse=True)
    # channel runs
    runs = {f"{r.channel} (round {r.round}: {r.query})" if r.query else r.channel: r for r in recall.channels}
    channels = panel.evidence.channels
    for r in range(channels.rowCount()):
        run = runs[channels.item(r, 0).text()]
        assert channels.item(r, 1).text() == str(run.size)
        assert channels.item(r, 2).text() == str(len(run.hits))
    # conflicts
    conflict = session.record.build.context.conflicts[0]
    assert panel.evidence.conflicts.item(0, 0).text() == conflict.key == "deadline"
    assert panel.evidence.conflicts.item(0, 1).text() == conflict.chosen
    # routing: the chosen anchor and every candidate with its feature scores
    routing = session.record.build.routing
    routes = panel.evidence.routes
    assert routes.rowCount() == len(routing["candidates"])
    node_col, score_col, sem_col = _column(routes, "Node"), _column(routes, "Score"), _column(routes, "sem")
    by_node = {routes.item(r, node_col).toolTip(): r for r in range(routes.rowCount())}
    anchor = session.record.build.anchor_node
    assert routes.item(by_node[anchor], 0).text() == "✓ anchor"
    top = routing["candidates"][0]
    assert routes.item(by_node[top["node_id"]], score_col).text() == f"{top['score']:.3f}"
    assert routes.item(by_node[top["node_id"]], sem_col).text() == f"{top['components']['sem']:.3f}"
    assert anchor[:8] in panel.evidence.routing.text()


def test_the_routing_summary_says_how_sure_routing_was_and_which_other_branch_it_reads(
        panel: InspectorPanel, session: Session) -> None:
    record = session.record
    assert "sure of" not in panel.evidence.routing.text()  # routing was sure: nothing to say
    routing = {**record.build.routing, "shares": {"share": 0.6, "alternatives": [["n-other-branch", 0.4]]}}
    unsure = record.model_copy(update={"build": record.build.model_copy(update={"routing": routing})})
    panel.show_record(unsure)
    said = panel.evidence.routing.text()
    assert "60% sure of this branch; so the context also reads the branch of n-other-b" in said
    panel.show_record(record)


# ---------------------------------------------------------------------- context


def test_context_tab_shows_blocks_in_order_budget_dropped_and_the_exact_prompt(panel: InspectorPanel, session: Session) -> None:
    ctx = session.record.build.context
    blocks = panel.context.blocks
    assert _cells(blocks, 1) == [b.block_type.value for b in ctx.blocks]
    assert _cells(blocks, 3) == [str(b.token_estimate) for b in ctx.blocks]
    assert _cells(blocks, 2) == [b.priority.value for b in ctx.blocks]
    blocks.setCurrentCell(len(ctx.blocks) - 1, 0)
    assert ctx.blocks[-1].content in panel.context.block_view.toPlainText()
    bar = panel.context.budget_bar
    assert {s.name: (s.quota, s.used) for s in bar.segments} == {k: (v.quota, v.used) for k, v in ctx.segments.items()}
    assert bar.budget == ctx.budget and bar.tokens == ctx.tokens
    bar.resize(300, bar.height())  # a narrow dock: the legend wraps, every entry inside the bar
    metrics, right = bar.fontMetrics(), []
    for seg, (x, _row) in zip(bar.segments, bar.legend_places(metrics), strict=True):
        right.append(x + 14 + metrics.horizontalAdvance(seg.legend()))
    assert max(right) <= bar.width() and max(row for _, row in bar.legend_places(metrics)) >= 1
    assert bar.minimumHeight() > 3 * bar.ROW_H + 30  # taller for the second row
    # the branch summary has no share of its own: it is not "over its quota" when it uses leftovers
    summary, evidence = SegmentBar("summary", 0, 132), SegmentBar("evidence", 200, 260)
    assert (summary.legend(), summary.over()) == ("summary 132 of leftover", False)
    assert (evidence.legend(), evidence.over()) == ("evidence 260/200", True)
    assert "what the other segments left" in summary.line()
    dropped = panel.context.dropped
    assert dropped.rowCount() == len(ctx.dropped)
    shown = {dropped.item(r, 0).toolTip(): dropped.item(r, 3).text() for r in range(dropped.rowCount())}
    assert shown == {d.item_id: d.reason for d in ctx.dropped}
    text = panel.context.prompt.toPlainText()
    assert text == prompt_text(session.record.build.prompt)
    for message in session.record.build.prompt:
        assert message["content"] in text
    assert panel.context.prompt.isReadOnly()


# ---------------------------------------------------------------------- timing


def test_timing_tab_shows_each_stage_and_the_answer_speed(panel: InspectorPanel, session: Session) -> None:
    record = session.record
    stages = panel.timing.stages
    shown = {stages.item(r, 0).text(): stages.item(r, 1).text() for r in range(stages.rowCount())}
    assert shown["recall"] == fmt_ms(record.timing.recall_ms)
    assert shown["build (total)"] == fmt_ms(record.timing.build_ms)
    assert shown["answer"] == fmt_ms(record.timing.answer_ms)
    assert shown["first token"] == fmt_ms(record.timing.first_token_ms)
    recall_row = _cells(stages, 0).index("recall")
    assert isinstance(stages.cellWidget(recall_row, 2), MeterWidget)
    answer = {panel.timing.answer.item(r, 0).text(): panel.timing.answer.item(r, 1).text()
              for r in range(panel.timing.answer.rowCount())}
    rate = record.usage["completion_tokens"] / (record.usage["latency_ms"] / 1000)
    assert tokens_per_second(record.usage) == pytest.approx(rate)
    assert answer["tokens / s"] == f"{rate:.1f}"
    assert answer["completion tokens"] == str(record.usage["completion_tokens"])
    assert answer["model"] == "scripted"


# ---------------------------------------------------------------------- citations


def test_citation_numbers_map_to_the_evidence_lines_of_the_prompt(session: Session) -> None:
    record = session.record
    citations = citation_map(record)
    for text in ("my deadline is Friday for the website launch", "my deadline is Monday now"):
        n = _prompt_number(record, text)
        assert citations[n].evidence_id == session.message_ids[text] and citations[n].in_prompt
    assert 3 in citations and not citations[3].in_prompt  # cited, but dropped by the budget
    dropped = {d.item_id: d.reason for d in record.build.context.dropped}
    assert citations[3].evidence_id in dropped and dropped[citations[3].evidence_id] in citations[3].note
    assert 9 not in citations
    lines = {line.text: line for line in context_lines(record)}
    monday = _prompt_number(record, "my deadline is Monday now")
    line = lines[f"[{monday}] user: my deadline is Monday now"]
    assert line.evidence_ids == (session.message_ids["my deadline is Monday now"],) and line.number == monday
    conflict = next(x for x in lines.values() if x.text.startswith("Conflict on deadline"))
    assert set(conflict.evidence_ids) == {session.message_ids["my deadline is Monday now"],
                                          session.message_ids["my deadline is Friday for the website launch"]}


def test_split_citations_finds_single_grouped_and_id_markers() -> None:
    eid = "0123456789abcdef0123456789abcdef"
    pieces = split_citations(f"a [1] b [2, 3] c [x] d [{eid}] e [{'f' * 32}]", {eid})
    assert [p.numbers for p in pieces if p.numbers] == [(1,), (2, 3)]
    assert [p.ids for p in pieces if p.ids] == [(eid,)]
    assert "".join(p.text for p in pieces) == f"a [1] b [2, 3] c [x] d [{eid}] e [{'f' * 32}]"


def _hover_text(qtbot, browser, needle: str) -> None:
    """Move the mouse over the middle of ``needle`` in a text browser."""
    found = browser.document().find(needle)
    assert not found.isNull(), needle
    cursor = QTextCursor(browser.document())
    cursor.setPosition(found.selectionStart() + 1)
    rect = browser.cursorRect(cursor)
    QTest.mouseMove(browser.viewport(), QPoint(rect.center().x() + 2, rect.center().y()))


def _hover_row(view: QAbstractItemView, row: int) -> None:
    rect = view.visualRect(view.model().index(row, 0))
    QTest.mouseMove(view.viewport(), rect.center())


def test_hovering_a_citation_or_an_evidence_line_emits_its_evidence_ids(qtbot, panel: InspectorPanel, session: Session) -> None:
    record = session.record
    turn = panel.turn
    panel.tabs.setCurrentWidget(turn)
    qtbot.wait(20)
    emitted: list[list[str]] = []
    panel.evidence_hovered.connect(emitted.append)
    monday = session.message_ids["my deadline is Monday now"]
    n = _prompt_number(record, "my deadline is Monday now")
    assert f"[{n}]" in turn.answer.toPlainText()
    with qtbot.waitSignal(panel.evidence_hovered, timeout=2000) as blocker:
        _hover_text(qtbot, turn.answer, f"[{n}]")
    assert blocker.args == [[monday]]
    with qtbot.waitSignal(panel.evidence_hovered, timeout=2000) as blocker:
        _hover_text(qtbot, turn.answer, "The deadline")
    assert blocker.args == [[]]
    # a line of the context sent
    friday = session.message_ids["my deadline is Friday for the website launch"]
    texts = [turn.lines.item(r).text() for r in range(turn.lines.count())]
    row = next(r for r, t in enumerate(texts) if t.endswith("user: my deadline is Friday for the website launch") and t.startswith("["))
    with qtbot.waitSignal(panel.evidence_hovered, timeout=2000) as blocker:
        _hover_row(turn.lines, row)
    assert blocker.args == [[friday]]
    header = texts.index("Evidence:")
    with qtbot.waitSignal(panel.evidence_hovered, timeout=2000) as blocker:
        _hover_row(turn.lines, header)
    assert blocker.args == [[]]
    assert emitted == [[monday], [], [friday], []]


def test_hovering_a_recall_candidate_row_emits_its_id(qtbot, panel: InspectorPanel, session: Session) -> None:
    panel.tabs.setCurrentWidget(panel.evidence)
    qtbot.wait(20)
    table = panel.evidence.candidates
    table.scrollToTop()
    id_col = _column(table, "Id")
    with qtbot.waitSignal(panel.evidence_hovered, timeout=2000) as blocker:
        rect = table.visualRect(table.model().index(0, id_col))
        QTest.mouseMove(table.viewport(), rect.center())
    assert blocker.args == [[table.item(0, id_col).toolTip()]]


def test_cited_evidence_flags_dropped_and_unknown_numbers(panel: InspectorPanel, session: Session) -> None:
    cited = [panel.turn.cited.item(r).text() for r in range(panel.turn.cited.count())]
    assert [t.split(" ", 1)[0] for t in cited] == ["[1]", "[2]", "[3]", "[9]"]
    assert "not in the prompt" in cited[2]
    assert "no such evidence number" in cited[3]
    assert "user: my deadline is Monday now" in cited[_prompt_number(session.record, "my deadline is Monday now") - 1]
    html = panel.turn.answer.toHtml()
    assert 'href="cite:1"' in html and 'href="cite:2"' in html and 'href="cite:9"' not in html


def test_streaming_text_shows_until_the_final_record_arrives(qtbot, session: Session) -> None:
    panel = InspectorPanel()
    qtbot.addWidget(panel)
    partial = session.record.model_copy(update={"output": "", "finish_reason": "", "usage": {}})
    partial.timing = partial.timing.model_copy(update={"first_token_ms": None, "answer_ms": None})
    panel.show_record(partial)
    assert panel.turn.answer.toPlainText() == ""
    panel.set_streaming_text("The deadline moved to Monday [2]", partial.turn_id)
    assert panel.turn.answer.toPlainText() == "The deadline moved to Monday [2]"
    assert panel.turn.status.text().startswith("Streaming")
    assert 'href="cite:2"' in panel.turn.answer.toHtml()
    panel.set_streaming_text("Both [1, 2]", partial.turn_id)
    assert panel.turn.answer.toPlainText() == "Both [1, 2]"
    assert 'href="cite:1"' in panel.turn.answer.toHtml() and 'href="cite:2"' in panel.turn.answer.toHtml()
    panel.set_streaming_text("The deadline moved to Monday [2]", partial.turn_id)
    panel.set_streaming_text("another turn's text", "not-this-turn")
    assert panel.turn.answer.toPlainText() == "The deadline moved to Monday [2]"
    timing = {panel.timing.stages.item(r, 0).text(): panel.timing.stages.item(r, 1).text()
              for r in range(panel.timing.stages.rowCount())}
    assert timing["answer"] == "—"
    panel.show_record(partial)  # the same turn re-shown while streaming keeps the streamed text
    assert panel.turn.answer.toPlainText() == "The deadline moved to Monday [2]"
    panel.show_record(session.record)
    assert panel.turn.answer.toPlainText() == ANSWER
    assert panel.turn.status.text().startswith("finish: stop")



def test_a_theme_switch_recolours_the_shown_record_and_keeps_a_streamed_answer(
    qtbot, qapp, panel: InspectorPanel, session: Session
) -> None:
    from app.ui import theme

    style, palette, sheet = qapp.style().name(), qapp.palette(), qapp.styleSheet()
    try:
        theme.apply_theme(qapp, False)
        qtbot.waitUntil(lambda: theme.LIGHT.warn in panel.turn.answer.toHtml(), timeout=2000)  # the dropped [3]
        theme.apply_theme(qapp, True)
        qtbot.waitUntil(lambda: theme.DARK.warn in panel.turn.answer.toHtml(), timeout=2000)
        assert theme.LIGHT.warn not in panel.turn.answer.toHtml()
        qtbot.waitUntil(lambda: theme.DARK.muted in panel.title.styleSheet(), timeout=2000)
        partial = session.record.model_copy(update={"output": "", "finish_reason": "", "usage": {}})
        panel.show_record(partial)
        panel.set_streaming_text("Still arriving [3]", partial.turn_id)
        theme.apply_theme(qapp, False)
        qtbot.waitUntil(lambda: theme.LIGHT.warn in panel.turn.answer.toHtml(), timeout=2000)
        assert panel.turn.answer.toPlainText() == "Still arriving [3]"
        assert panel.turn.streaming_text() == "Still arriving [3]"
    finally:
        qapp.setStyle(style)
        qapp.setPalette(palette)
        qapp.setStyleSheet(sheet)


def test_a_fitted_table_keeps_room_for_its_horizontal_scroll_bar(qtbot) -> None:
    table = make_table(["a", "b"])
    qtbot.addWidget(table)
    table.resize(160, 200)
    table.show()
    qtbot.waitExposed(table)
    table.setRowCount(3)
    table.setColumnWidth(0, 40)  # both columns fit the width
    fit_height(table)
    narrow_fit = table.minimumHeight()
    table.setColumnWidth(0, 400)  # wider than the table: a horizontal scroll bar appears
    fit_height(table)
    assert table.minimumHeight() == narrow_fit + table.horizontalScrollBar().sizeHint().height()
