"""Progressive detail in the window, on the real Engine (SQLite + LanceDB, scripted model): a long
branch (history ingested and summarized) whose question's context carries a summary line;
"More detail" three times brings that part's turns back raw, each time the inspector shows the
recompiled record with the Context tab still open and the status bar says what changed; what
cannot apply is said in one line; one of those turns, made less detailed, puts the part back into the
summary; a branch is brought in; a collapsed node shows the summary of
what it hides, gives its own answer back when expanded, and shows it again when the session
opens with the node still collapsed."""

from __future__ import annotations

from app.config import Settings
from app.core.pipeline.builder import NEW_ROOT
from app.core.pipeline.detail import DetailAction
from app.core.types import BlockType
from app.ui.canvas.style import BODY_MAX_LINES, TURN_MAX_HEIGHT
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until
from tests.ui.test_detail_ui import QUESTION, history


def _blocks(window: MainWindow, kind: BlockType) -> list:
    record = window.inspector.record
    return [b for b in record.build.context.blocks if b.block_type == kind] if record is not None else []


def test_more_detail_brings_the_raw_turns_and_a_collapsed_node_shows_its_summary(qtbot, aloop,
                                                                               settings: Settings) -> None:
    window = MainWindow(settings.model_copy(update={"default_budget": 1200}), fake_services(["Noted."]))
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    c, scene, status = window.controller, window.scene, window.statusBar()
    context = window.inspector.context
    assert drive(aloop, c.load())
    state, sid = c.state, c.session_id
    drive(aloop, c.engine.ingest(sid, history(100)))
    drive(aloop, c.engine.summarize(sid))
    end = state.node_of(state.turn_order[-1])
    c.submit("Separately: the garden needs 12 tulips.", anchor=NEW_ROOT, budget=1200)
    drive(aloop, until(lambda: len(state.turn_order) == 101 and not c.busy(), 60, "the garden answer"))
    garden = state.node_of(state.turn_order[-1])
    c.submit(QUESTION, anchor=end, budget=1200)
    drive(aloop, until(lambda: len(state.turn_order) == 102 and not c.busy(), 60, "the answer"))
    asked = state.turn_order[-1]
    drive(aloop, window.show_turn(asked))
    window.inspector.tabs.setCurrentWidget(context)
    [summary] = _blocks(window, BlockType.SUMMARY)
    span = summary.refs[-1].selector.removeprefix("turns:")  # the part just before the raw window
    first, last = (int(x) for x in span.split("-"))
    part_turns = set(state.order[first:last + 1])
    assert not part_turns & {r.evidence_id for b in _blocks(window, BlockType.CONVERSATION) for r in b.refs}
    assert context.detail.branches.currentText() == "Separately: the garden needs 12 tulips. (1 turn)"

    context.blocks.setCurrentCell(list(summary.block_type for summary in window.inspector.record.build.context.blocks)
                                  .index(BlockType.SUMMARY), 0)
    assert context.detail.select(span)
    for step in range(1, 4):
        context.detail.more.click()
        drive(aloop, until(lambda step=step: len(window.inspector.record.revisions) == step, 30, f"expand {step}"))
        assert window.inspector.tabs.currentWidget() is context  # the Context tab stays open
        ctx = window.inspector.record.build.context
        assert ctx.tokens <= ctx.budget == 1200
        message = status.currentMessage()
        assert message.startswith(f"More detail: turns {span} are now ") and f"({ctx.tokens} of 1200 tokens)" in message
        if step < 3:
            assert context.detail.current_key() == span  # the same part stays chosen
    raw = {r.evidence_id for b in _blocks(window, BlockType.CONVERSATION) for r in b.refs}
    fit = len(part_turns & raw)
    assert fit > len(part_turns) / 2  # the part's turns are back, raw, as many as the budget holds
    assert message.startswith(f"More detail: turns {span} are now shown in full" + (
        f"; {fit} of its {len(part_turns)} turns fit the budget (" if fit < len(part_turns) else " ("))
    assert f"turns:{span}" not in {r.selector for b in window.inspector.record.build.context.blocks for r in b.refs}
    assert context._block_type() == BlockType.CONVERSATION  # its turns are where the selection went
    assert context.detail.said.text() == f"You set: turns {span} shown in full."
    assert not context.detail.more.isEnabled()

    context.detail_requested.emit(asked, DetailAction(kind="expand", span=span))  # nothing finer: one line
    drive(aloop, until(lambda: status.currentMessage() == f"Turns {span} are already shown in full.", 30,
                       "the refusal"))
    assert len(window.inspector.record.revisions) == 3

    assert context.detail.select(sorted(part_turns & raw)[0])  # one of the part's turns: less detail
    context.detail.less.click()
    drive(aloop, until(lambda: len(window.inspector.record.revisions) == 4, 30, "the part summarized again"))
    assert status.currentMessage().startswith(f"Less detail: turns {span} are now summarized in detail")
    assert not part_turns & {r.evidence_id for b in _blocks(window, BlockType.CONVERSATION) for r in b.refs}

    context.detail.bring.click()  # the garden branch, beside this one
    drive(aloop, until(lambda: len(window.inspector.record.revisions) == 5, 30, "the branch brought in"))
    assert window.inspector.record.build.detail["focus"] == garden
    assert status.currentMessage().startswith("Bring in: the branch “Separately: the garden needs 12 tulips.” "
                                              "is now part of this context (")
    assert "12 tulips" in "\n".join(b.content for b in window.inspector.record.build.context.blocks)
    assert context.detail.take_out.isVisible()
    assert drive(aloop, c.engine.replay(asked)) == []  # what the window showed is what is recorded

    # A node collapsed on the canvas shows what it hides; expanded, its own text again.
    node = state.node_of(state.turn_order[50])
    item = scene.item(node)
    own = item.body
    scene.node_action.emit("collapse", node)
    drive(aloop, until(lambda: item.summary, 30, "the collapsed node's summary"))
    hidden = 49 + 1  # the history turns after it and the question's turn
    assert item.summary.startswith(f"Summary of {hidden} hidden turns:\n")
    assert "src/step_" in item.summary and item.body == item.summary
    lines = item.body_lines()  # the summary, keeping a line for the "+N" badge
    assert 0 < len(lines) < BODY_MAX_LINES and item.height == TURN_MAX_HEIGHT
    assert item.toolTip().startswith(item.heading() + "\n\n" + f"Summary of {hidden} hidden turns:")
    assert not scene.item(state.node_of(asked)).isVisible()
    scene.node_action.emit("expand", node)
    assert item.summary == "" and item.body == own and "Summary of" not in item.toolTip()
    scene.node_action.emit("collapse", node)
    drive(aloop, until(lambda: item.summary and state.graph.node(node).attrs.get("collapsed"), 30,
                       "collapsed again and saved"))
    drive(aloop, c.open_session(sid))  # the session opens with the node collapsed: its summary shows
    reopened = scene.item(node)
    assert reopened is not item and scene.is_collapsed(node)
    drive(aloop, until(lambda: reopened.summary.startswith(f"Summary of {hidden} hidden turns:\n"), 30,
                       "the summary after reopening"))
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))


def test_an_imported_history_turn_says_what_it_is_instead_of_asking_to_select_a_turn(qtbot, aloop,
                                                                                      settings: Settings) -> None:
    window = MainWindow(settings, fake_services(["Noted."]))
    qtbot.addWidget(window)
    c = window.controller
    assert drive(aloop, c.load())
    drive(aloop, c.engine.ingest(c.session_id, history(3)))
    first = c.state.turn_order[0]
    drive(aloop, window.show_turn(first))
    note = window.inspector.empty.text()
    assert window.inspector.stack.currentWidget() is window.inspector.empty
    assert note.startswith("Imported history") and c.state.messages[c.state.order[0]].text[:30] in note
    assert "No context was built" in note
