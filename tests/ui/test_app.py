"""The desktop app end to end on the real engine: window, composer, canvas, re-anchoring, panels,
settings and export/import.

The ``model`` tests load the real SmolLM2 GGUF and the real embedder once per module; the others
run the same window on real SQLite + LanceDB with the scripted model (fast).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication

from app.bench_startup import SELF_TEST_TIMES
from app.config import Settings
from app.core.session import versions
from app.core.types import EdgeKind, NodeKind
from app.ui.window import MainWindow
from tests.conftest import stored
from tests.ui.conftest import drive, fake_services, until


def _open(qtbot, settings: Settings, services) -> MainWindow:
    window = MainWindow(settings, services)
    qtbot.addWidget(window)
    window.show()
    return window


def _send(window: MainWindow, text: str) -> None:
    window.composer.edit.setPlainText(text)
    window.composer.send.click()


async def _answered(window: MainWindow, count: int) -> list[str]:
    """Wait until ``count`` turns of the open session are answered; return their turn ids."""
    c = window.controller

    def done() -> list[str] | None:
        state = c.state
        if state is None or c.busy():
            return None
        turns = [t for t in state.turn_order if len(state.turns[t].message_ids) >= 2]
        return turns if len(turns) >= count else None

    return await until(done, 180, f"{count} answered turns")


def _close(window: MainWindow, loop) -> None:
    window.close()
    drive(loop, until(lambda: window._shut, 30, "shutdown"))


# ---------------------------------------------------------------------- fast: scripted model


def test_window_shows_at_once_and_composer_says_why_until_ready(qtbot, aloop, settings: Settings) -> None:
    window = _open(qtbot, settings, fake_services())
    assert window.isVisible()
    assert not window.composer.send.isEnabled()
    assert "Loading" in window.composer.reason.text()
    _send(window, "kept while loading")
    assert window.composer.edit.toPlainText() == "kept while loading"  # nothing lost
    drive(aloop, window.controller.load())
    assert window.composer.send.isEnabled() and window.composer.reason.isHidden()
    assert window.controller.state is not None
    _close(window, aloop)


def test_a_model_that_fails_to_load_is_explained(qtbot, aloop, settings: Settings) -> None:
    services = fake_services()

    def broken(settings: Settings, progress) -> None:
        raise RuntimeError("not a GGUF file: models/broken.gguf")

    from dataclasses import replace

    window = _open(qtbot, settings, replace(services, build_engine=broken))
    assert drive(aloop, window.controller.load()) is False
    assert not window.composer.send.isEnabled()
    assert "broken.gguf" in window.composer.reason.text() and "Settings" in window.composer.reason.text()
    _close(window, aloop)


def test_streams_queue_beyond_the_limit_and_stop_is_prompt(qtbot, aloop, settings: Settings) -> None:
    settings = settings.model_copy(update={"max_concurrent_streams": 1})
    long = " ".join(f"w{i}" for i in range(400))
    window = _open(qtbot, settings, fake_services([long], delay=0.01))
    drive(aloop, window.controller.load())
    _send(window, "Tell me a long story about ships")
    _send(window, "And a second one about trains")
    c = window.controller
    drive(aloop, until(lambda: c.live and next(iter(c.live.values())).pieces > 5, 30, "first stream"))
    scheduler = c.engine.scheduler(c.session_id)
    assert len(c.live) == 1 and len(scheduler.queued()) == 1  # the second input waits for a free stream
    first = next(iter(c.live))
    window.streams.stop_requested.emit(first)
    turns = drive(aloop, _answered(window, 2))
    state = c.state
    assert state is not None
    answer = state.messages[state.turns[turns[0]].message_ids[1]].text
    assert len(answer.split()) < 400  # stopped early
    _close(window, aloop)


def test_pause_its_task_from_the_streams_dock_keeps_the_work(qtbot, aloop, settings: Settings) -> None:
    long = " ".join(f"w{i}" for i in range(400))
    window = _open(qtbot, settings, fake_services([long], delay=0.01))
    drive(aloop, window.controller.load())
    _send(window, "Write a plan with numbered steps for the garden party")
    c = window.controller
    drive(aloop, until(lambda: c.live and next(iter(c.live.values())).pieces > 5, 30, "the task streams"))
    window.streams.pause_requested.emit(next(iter(c.live)))

    async def paused() -> None:  # the task paused, its work so far kept as its checkpoint
        for _ in range(1500):
            tasks = await c.engine.list_tasks(c.session_id)
            if tasks and tasks[0].paused and tasks[0].checkpoint_id:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the task did not pause: {tasks}")

    drive(aloop, paused())
    _close(window, aloop)


def test_export_import_round_trip_through_the_file_menu_paths(qtbot, aloop, tmp_path: Path) -> None:
    first = _open(qtbot, Settings.load(tmp_path / "a"), fake_services(["Sure [1]."]))
    drive(aloop, first.controller.load())
    _send(first, "Plan the garden: tomatoes along the south wall")
    _send(first, "Which vegetables go along the south wall?")
    drive(aloop, _answered(first, 2))
    exported = drive(aloop, first.file_actions.export_to(tmp_path / "garden.json"))
    # Importing into the same store is refused and nothing is written.
    before = len(drive(aloop, first.controller.sessions()))
    assert drive(aloop, first.file_actions.import_from(exported)) is None
    assert len(drive(aloop, first.controller.sessions())) == before
    _close(first, aloop)

    second = _open(qtbot, Settings.load(tmp_path / "b"), fake_services())
    drive(aloop, second.controller.load())
    session_id = drive(aloop, second.file_actions.import_from(exported))
    assert session_id == json.loads(exported.read_text(encoding="utf-8"))["session"]["session_id"]
    state = second.controller.state
    assert state is not None and state.session_id == session_id
    turn_nodes = [n for n in state.graph.nodes(NodeKind.TURN)]
    assert len(turn_nodes) == 2 and all(second.scene.item(n.node_id) is not None for n in turn_nodes)
    again = drive(aloop, second.file_actions.export_to(tmp_path / "again.json"))
    assert again.read_bytes() == exported.read_bytes()
    _close(second, aloop)


def test_inject_from_the_node_menu_is_undone_and_redone_with_ctrl_z(qtbot, aloop, settings: Settings) -> None:
    window = _open(qtbot, settings, fake_services(["Noted [1]."]))
    drive(aloop, window.controller.load())
    _send(window, "Plan the garden: tomatoes along the south wall")
    _send(window, "Explain how quicksort partitions an array around a pivot.")
    t1, t2 = drive(aloop, _answered(window, 2))
    state = window.controller.state
    garden, sort = state.node_of(t1), state.node_of(t2)
    merges = lambda: [e.dst for e in state.graph.out_edges(sort, EdgeKind.MERGES)]  # noqa: E731
    window.scene.item(garden).setSelected(True)  # the result to merge, then Inject on the target
    window.canvas_actions.node_action("inject", sort)
    drive(aloop, until(lambda: merges() == [garden], 30, "the merge"))
    assert window.undo.undoText().startswith("inject 1 into")
    window.undo.undo()
    drive(aloop, until(lambda: merges() == [], 30, "the merge taken back"))
    window.undo.redo()
    drive(aloop, until(lambda: merges() == [garden], 30, "the merge again"))
    _close(window, aloop)


def test_restore_from_a_checkpoint_card_starts_a_sibling_branch(qtbot, aloop, settings: Settings) -> None:
    """A checkpoint's card menu offers Restore: the open task the checkpoint kept comes back as a
    paused copy on the canvas, and the next input starts a new branch beside the one that went on."""
    window = _open(qtbot, settings, fake_services(["Noted [1]."]))
    drive(aloop, window.controller.load())
    _send(window, "Plan the garden: tomatoes along the south wall")
    [t1] = drive(aloop, _answered(window, 1))
    c, state = window.controller, window.controller.state
    first = state.node_of(t1)
    task = drive(aloop, c.engine.create_task(state.session_id, "Order the seeds", turn_id=t1)).tasks[0]
    window.canvas_actions.node_action("reply", first)
    _send(window, "And the beans along the fence?")
    [_, t2] = drive(aloop, _answered(window, 2))
    assert state.graph.parent(state.node_of(t2)) == first
    assert "restore" not in window.scene.node_actions(first)
    window.canvas_actions.node_action("checkpoint", first)
    drive(aloop, until(lambda: "restore" in window.scene.node_actions(first), 30, "the checkpoint on the card"))
    kept = state.graph.node(first).attrs["checkpoint_state"]
    assert task.task_id in [t["task_id"] for t in kept["tasks"]]  # (beside the garden task its turn made, done)
    menu = window.scene.build_node_menu(first)
    [restore] = [a for a in menu.actions() if a.data() == "restore"]
    assert restore.text() == "Restore: new branch from this checkpoint"
    restore.trigger()
    drive(aloop, until(lambda: window.composer.anchor == first, 30, "the composer anchored at the checkpoint"))
    assert "Restored the checkpoint" in window.statusBar().currentMessage()
    copies = [n for n in state.graph.nodes(NodeKind.TASK) if n.attrs.get("restored") == first]
    assert [n.label for n in copies] == ["Order the seeds"]  # the open one, not the one done
    assert window.scene.item(copies[0].node_id) is not None and copies[0].attrs["paused"]
    _send(window, "Then plan it with peppers instead")
    [_, _, t3] = drive(aloop, _answered(window, 3))
    assert state.graph.parent(state.node_of(t3)) == first
    assert set(state.graph.children(first)) == {state.node_of(t2), state.node_of(t3)}
    menu = window.scene.build_node_menu(first)
    [remove] = [a for a in menu.actions() if a.data() == "checkpoint"]
    assert remove.text() == "Remove checkpoint"
    remove.trigger()
    drive(aloop, until(lambda: "restore" not in window.scene.node_actions(first), 30, "the mark removed"))
    assert state.graph.node(first).attrs.get("checkpoint_state") is None
    _close(window, aloop)


def test_settings_dialog_rejects_a_bad_model_file(qtbot, aloop, settings: Settings, tmp_path: Path) -> None:
    window = _open(qtbot, settings, fake_services())
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a model" * 100)
    dialog = window.file_actions.open_settings()
    accepted: list[Settings] = []
    dialog.settings_accepted.connect(accepted.append)
    dialog.set_chat_model(str(bad))
    dialog.save()
    drive(aloop, until(lambda: dialog.error_text(), 60, "the verification error"))
    assert "broken.gguf" in dialog.error_text()
    assert not accepted and window.settings.chat_model == settings.chat_model
    dialog.reject()
    _close(window, aloop)


# ---------------------------------------------------------------------- the real small model


@pytest.fixture(scope="module")
def real_window(qapp: QApplication, tmp_path_factory) -> Iterator[tuple[MainWindow, asyncio.AbstractEventLoop]]:
    import qasync

    from app import desktop

    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    settings = Settings.load(tmp_path_factory.mktemp("desk") / "data")
    window = MainWindow(settings, desktop.services())
    window.show()
    assert drive(loop, window.controller.load(), 300)
    yield window, loop
    asyncio.set_event_loop(loop)  # later tests' own loops were made current meanwhile
    window.close()
    drive(loop, until(lambda: window._shut, 60, "shutdown"))
    loop.close()
    asyncio.set_event_loop(None)


@pytest.mark.model
def test_real_session_routes_streams_reanchors_and_inspects(real_window) -> None:
    window, loop = real_window
    c = window.controller
    updates: list[tuple[str, str]] = []
    c.answer_updated.connect(lambda t, text: updates.append((t, text)))
    routed: list[str] = []
    c.turn_routed.connect(lambda key, turn_id, node_id, record: routed.append(node_id))

    _send(window, "I am planning a trip to Lisbon in May. What should I pack for the weather?")
    (t1,) = drive(loop, _answered(window, 1))
    state = c.state
    assert state is not None
    n1 = state.node_of(t1)
    assert n1 and window.scene.item(n1) is not None and routed == [n1]
    assert state.graph.parent(n1) is None  # the first input starts a root
    # The answer streamed into the node: several growing updates, the last one the full answer.
    texts = [text for t, text in updates if t == t1]
    answer = state.messages[state.turns[t1].message_ids[1]].text
    assert len(texts) >= 2 and answer.startswith(texts[0]) and texts[-1] == answer

    _send(window, "For the Lisbon trip in May, which shoes should I pack for walking?")
    _send(window, "Explain how quicksort partitions an array around a pivot.")
    t1_, t2, t3 = drive(loop, _answered(window, 3))
    n2, n3 = state.node_of(t2), state.node_of(t3)
    assert state.graph.parent(n2) == n1  # the follow-up lands on its anchor
    assert state.graph.parent(n3) is None  # the unrelated input starts a new root
    assert {n1, n2, n3} <= {nid for nid in window.scene.node_ids()}

    # Drag the quicksort turn onto the Lisbon branch: re-planned, recompiled, stored, undoable,
    # and answered again from there as a second version of the turn (the first one put away).
    window.scene.node_dropped.emit(n3, n2)
    drive(loop, until(lambda: state.graph.parent(n3) == n2, 60, "re-anchor"))
    record = drive(loop, c.record(t3))
    assert record is not None and record.build.anchor_node == n2
    assert record.build.routing.get("override") == n2
    *_, t4 = drive(loop, _answered(window, 4))
    n4 = state.node_of(t4)
    assert versions.versions(state.graph, n3) == [n3, n4] and state.graph.parent(n4) == n2
    assert state.graph.node(n3).attrs.get(versions.HIDDEN) and not window.scene.item(n3).isVisible()
    window.undo.undo()  # the turn back where it was, its own answer shown again
    drive(loop, until(lambda: state.graph.parent(n3) is None, 60, "undo"))
    record = drive(loop, c.record(t3))
    assert record is not None and record.build.anchor_node is None
    drive(loop, until(lambda: state.graph.node(n4).attrs.get(versions.HIDDEN), 30, "the first version shown"))
    assert not state.graph.node(n3).attrs.get(versions.HIDDEN) and window.scene.item(n3).isVisible()

    # Selecting a turn shows its recorded intent, plan and evidence in the inspector.
    window.scene.node_selected.emit(n2)
    drive(loop, until(lambda: window.inspector.record is not None and window.inspector.record.turn_id == t2, 30, "inspector"))
    shown = window.inspector.record
    assert shown.build.intent["mode"] and shown.build.plan["budget"]
    assert any(c_.kept for c_ in shown.build.recall.candidates)
    assert n1 in {c_["node_id"] for c_ in shown.build.routing["candidates"]}


@pytest.mark.model
def test_python_m_app_opens_answers_quits_and_reopens_the_session(tmp_path: Path) -> None:
    """README command (a)'s entry point, as a process: the real loop, models, LanceDB and window."""
    import os
    import re
    import subprocess
    import sys

    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PCM_DATA_DIR": str(tmp_path / "data")}
    sessions = []
    for text in ("Say hello in five words.", "And now say goodbye."):
        proc = subprocess.run([sys.executable, "-m", "app", "--self-test", text], env=env, capture_output=True,
                              text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
        assert proc.returncode == 0, proc.stderr[-3000:]
        found = re.search(r"answered .* in session (\w+)", proc.stdout)
        assert found, proc.stdout
        sessions.append(found.group(1))
        times = SELF_TEST_TIMES.search(proc.stdout)  # what `pcm bench startup` reads
        assert times and 0 < float(times.group(1)) < float(times.group(2)), proc.stdout
    assert sessions[0] == sessions[1]  # the second start reopened the session used last


def test_a_file_edited_in_a_watched_folder_reaches_the_canvas_and_the_env_panel(qtbot, aloop, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    settings = Settings.load(tmp_path / "data").model_copy(update={"watched_folders": [folder], "coalesce_ms": 100})
    window = _open(qtbot, settings, fake_services(["Noted."]))
    drive(aloop, window.controller.load())
    assert window.controller.sensors is not None
    (folder / "budget.md").write_text("Q3 budget: 40k for hardware", encoding="utf-8")
    drive(aloop, until(lambda: window.env.rows, 30, "an env event in the panel"))
    row = window.env.rows[0]
    assert row.kind == "file" and "budget.md" in row.title
    state = window.controller.state
    assert state is not None and row.node_id in state.graph
    assert state.graph.node(row.node_id).kind == NodeKind.ENV and window.scene.item(row.node_id) is not None
    window.scene.node_selected.emit(row.node_id)  # clicking the env node shows the event itself
    page = window.inspector.node_page
    drive(aloop, until(lambda: window.inspector.stack.currentWidget() is page, 10, "the env node's page"))
    assert page.heading.text().startswith("Environment event:") and "budget.md" in page.heading.text()
    shown = dict(page.lines())
    assert shown["Kind"] == "file" and shown["Source"] == str(folder) and "budget.md" in shown["Item"]
    assert shown["Routed to"] and page.content.toPlainText() == "Q3 budget: 40k for hardware"
    drive(aloop, until(lambda: any("files" in line for line in window.env.status.text().splitlines()), 10, "status"))
    _close(window, aloop)
    assert window.controller.sensors is None  # stopped with the app

    again = _open(qtbot, settings, fake_services(["Noted."]))  # the dock keeps its history
    drive(aloop, again.controller.load())
    drive(aloop, until(lambda: again.env.rows, 30, "the stored events in the panel"))
    restored = again.env.rows[0]
    assert (restored.event_id, restored.node_id, restored.kind, restored.change, restored.routed_to) == (
        row.event_id, row.node_id, row.kind, row.change, row.routed_to)
    assert "budget.md" in restored.title and again.env.table.rowCount() == len(again.env.rows)
    _close(again, aloop)


def test_the_env_panel_shows_refused_links_and_events_that_could_not_be_stored(qtbot, aloop, tmp_path: Path) -> None:
    """A symlink out of the folder is listed with its refusal (no content); an event the store
    refuses is listed as "not stored" with its reason; both again after a restart."""
    import os

    folder, outside = tmp_path / "notes", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret", encoding="utf-8")
    settings = Settings.load(tmp_path / "data").model_copy(update={"watched_folders": [folder], "coalesce_ms": 100})
    window = _open(qtbot, settings, fake_services(["Noted."]))
    drive(aloop, window.controller.load())
    store = window.controller.engine._ctx.store
    real_add = store.add_env_event

    def refuse_cursed(session_id, event):
        if "cursed" in event.title:
            raise OSError("disk full")
        return real_add(session_id, event)

    store.add_env_event = refuse_cursed
    os.symlink(outside / "secret.txt", folder / "link.txt")
    (folder / "cursed.md").write_text("never stored", encoding="utf-8")
    drive(aloop, until(lambda: len(window.env.rows) >= 2, 30, "two rows in the env panel"))
    rows = {r.title: r for r in window.env.rows}
    link, cursed = rows["link.txt"], rows["cursed.md"]
    assert link.note == "refused: link out of the watched folder" and link.node_id is not None
    assert cursed.change == "not stored" and cursed.note == "OSError: disk full" and cursed.node_id is None
    texts = [window.env.table.item(r, 2).text() for r in range(window.env.table.rowCount())]
    assert "link.txt — refused: link out of the watched folder" in texts and "cursed.md — OSError: disk full" in texts
    _close(window, aloop)
    again = _open(qtbot, settings.model_copy(update={"watched_folders": []}), fake_services(["Noted."]))
    drive(aloop, again.controller.load())
    drive(aloop, until(lambda: len(again.env.rows) >= 2, 10, "the recorded failure and the stored event"))
    assert sorted((r.title, r.change, r.note) for r in again.env.rows) == [
        ("cursed.md", "not stored", "OSError: disk full"),
        ("link.txt", link.change, "refused: link out of the watched folder")]
    _close(again, aloop)


def test_a_skipped_feed_entry_and_its_reason_show_in_the_env_panel(qtbot, aloop, tmp_path: Path) -> None:
    from app.config import FeedSource
    from tests.sensors.conftest import rss

    feed = tmp_path / "feed.xml"
    feed.write_bytes(rss(("a", "Fine", "x"), ("b", "BADTITLE", "y")).replace(b"BADTITLE", b"bad &#xD800; title"))
    settings = Settings.load(tmp_path / "data").model_copy(update={"feeds": [FeedSource(url=str(feed), interval_s=60)]})
    window = _open(qtbot, settings, fake_services(["Noted."]))
    drive(aloop, window.controller.load())
    drive(aloop, until(lambda: any(r.title == "Fine" for r in window.env.rows), 30, "the good entry in the panel"))
    drive(aloop, until(lambda: "entries_skipped" in window.env.status.text(), 10, "the skipped entry in the status"))
    line = next(x for x in window.env.status.text().splitlines() if "entries_skipped" in x)
    assert "skipped bad \ufffd title: its title has a character reference to an invalid code point (&#xD800;)" in line
    assert "1 entries_skipped" in line and "error" not in line
    assert not any("bad" in r.title for r in window.env.rows)
    _close(window, aloop)


def test_raising_a_waiting_input_in_the_streams_panel_runs_it_sooner(qtbot, aloop, settings: Settings) -> None:
    settings = settings.model_copy(update={"max_concurrent_streams": 1})
    window = _open(qtbot, settings, fake_services([" ".join(f"w{i}" for i in range(60))], delay=0.01))
    drive(aloop, window.controller.load())
    c = window.controller
    order: list[str] = []
    c.turn_routed.connect(lambda key, turn_id, node_id, record: order.append(record.build.text))
    for text in ("First: describe ships", "Second: describe trains", "Third: describe planes"):
        _send(window, text)
    drive(aloop, until(lambda: len(order) == 1, 30, "the first stream"))
    waiting = [h for h in c.engine.scheduler(c.session_id).queued()]
    third = next(h for h in waiting if h.text.startswith("Third"))
    box = window.streams.priority_box(third.stream_id)
    assert box is not None and box.isEnabled()
    box.setValue(5)  # the user raises it while it waits
    drive(aloop, _answered(window, 3))
    assert [t.split(":")[0] for t in order] == ["First", "Third", "Second"]
    _close(window, aloop)


def test_an_input_pinned_to_a_node_of_another_session_is_not_lost(qtbot, aloop, settings: Settings) -> None:
    """Pin a node in session A, switch to session B, send: nothing is recorded in B, no orphan
    card, the text is back in the composer with one line saying why."""
    window = _open(qtbot, settings, fake_services(["Answer."]))
    c = window.controller
    drive(aloop, c.load())
    _send(window, "Plan the Lisbon trip")
    drive(aloop, _answered(window, 1))
    state_a = c.state
    assert state_a is not None
    node_a = state_a.turns[state_a.turn_order[0]].node_id
    # the user pins A's node, then the engine is asked (as the stale chip would) in another session
    drive(aloop, c.open_session(None, title="B"))
    assert window.composer.anchor is None  # switching sessions drops the pin
    window.composer.set_anchor(node_a, "Plan the Lisbon trip")  # a stale pin reaching B
    _send(window, "What about Porto?")
    drive(aloop, until(lambda: window.composer.edit.toPlainText() == "What about Porto?", 30, "text restored"))
    composer = window.composer
    said = composer.notice.text()  # one line above the box, until dismissed, with a fix
    assert "Not sent" in said and "not in this session" in said and "\n" not in said
    assert not composer.notice.isHidden() and not composer.notice_fix.isHidden()
    state_b = c.state
    assert state_b is not None and state_b.session_id != state_a.session_id
    assert state_b.turn_order == [] and not state_b.graph.nodes()  # nothing recorded, no orphan card
    rows = drive(aloop, stored(c.engine, lambda store: store.list_turns(state_b.session_id)))
    assert rows == []
    composer.notice_fix.click()  # the fix: send it again, letting routing choose
    drive(aloop, _answered(window, 1))
    assert c.state.turns[c.state.turn_order[0]].message_ids and composer.notice.isHidden()
    assert composer.edit.toPlainText() == "" and composer.anchor is None
    _close(window, aloop)
