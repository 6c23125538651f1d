"""The window after a crash: interrupted turns say so on their cards and in the inspector, with
the partial answer that had streamed; the status bar says what the start repaired."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.config import Settings
from app.core.engine.context import EngineConfig
from app.llm.fakes import ScriptedChatModel
from app.ui.panels.inspector import UNBUILT_NOTE
from app.ui.window import MainWindow
from tests.conftest import engine_in
from tests.ui.conftest import drive, fake_services, until

LONG = " ".join(f"w{i}" for i in range(400))


async def _crash_mid_answer(data_dir: Path) -> tuple[str, str, str]:
    """A run killed while an answer streamed (and one killed right after recording an input):
    returns (session id, the streaming turn, the unbuilt turn)."""
    engine = engine_in(data_dir, config=EngineConfig(default_budget=400, llm_intent="off", checkpoint_s=0.05),
                       chat=ScriptedChatModel([LONG], token_delay_s=0.01))
    await engine.start()
    state = await engine.open_session(None, title="crashed")
    run = await engine.submit(state.session_id, "tell me a long story")

    async def saved() -> None:
        while True:
            cp = await engine._ctx.on_store(engine._ctx.store.answer_checkpoint, run.turn_id)
            if cp is not None and cp["pieces"] >= 10:
                return
            await asyncio.sleep(0.01)

    await asyncio.wait_for(saved(), 30)
    unbuilt, _ = await engine._ctx.on_store(engine._ctx.store.record_user_input, state.session_id, "a second question")
    await engine._ctx.on_store(engine._ctx.store.close)  # the process is gone: store and run lease
    run.stop()
    try:
        await run.done
    except Exception:  # noqa: BLE001 - its store is gone; that is the point
        pass
    engine._ctx.ex.shutdown(wait=True)
    return state.session_id, run.turn_id, unbuilt


def test_interrupted_turns_are_shown_as_such(qtbot, aloop, settings: Settings) -> None:
    session_id, streamed, unbuilt = drive(aloop, _crash_mid_answer(settings.data_dir))
    window = MainWindow(settings, fake_services())
    qtbot.addWidget(window)
    window.show()
    lines: list[str] = []
    window.controller.status_changed.connect(lines.append)
    drive(aloop, window.controller.load(session_id))
    assert any(line.startswith("Ready in") and "2 turn(s) were interrupted when the app last stopped; marked "
               "interrupted, 1 with the partial answer kept" in line for line in lines)
    drive(aloop, until(lambda: any(line.startswith("Indexing rows missing from the search index: 2/2 done; 2 turn(s)")
                                   for line in lines), 10, "the catch-up line"))  # the partial answer, the input
    state = window.controller.state
    assert state is not None
    nodes = {state.turns[t].node_id: t for t in (streamed, unbuilt)}
    assert all(nodes) and len(nodes) == 2
    for node_id in nodes:
        item = window.scene.item(node_id or "")
        assert item is not None and item.status == "interrupted"

    node_of = {t: n for n, t in nodes.items()}
    window._on_node_selected(node_of[streamed] or "")
    drive(aloop, until(lambda: window.inspector.record is not None, 10, "the record"))
    turn = window.inspector.turn
    partial = window.inspector.record.output
    assert partial and LONG.startswith(partial)
    assert turn.status.text() == (f"interrupted: the app stopped while its answer was streaming; "
                                  f"the {len(partial)} characters above are what had streamed")
    assert partial in turn.answer.toPlainText()

    window._on_node_selected(node_of[unbuilt] or "")
    drive(aloop, until(lambda: window.inspector.empty.text() == UNBUILT_NOTE, 10, "the note"))
    assert window.inspector.stack.currentWidget() is window.inspector.empty
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
