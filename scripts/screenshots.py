"""Render the real window with a small demo session into PNG files (see scripts/screenshots.sh).

The session is made by typing into the composer of the real app on the default models: a trip
branch, a follow-up, an unrelated question (a new root) and a re-anchored turn; then the window
each inspector tab, the Conversation dock, the canvas filtered to one topic and the Memory dock
(after a statement added to the profile) are grabbed, in the light and the dark theme; a file is
attached twice (two versions of its artifact). A long chat imported as history and summarized
shows progressive detail: the Context tab's Detail row on a summary line, that part made more
detailed, and a collapsed node showing the summary of what it hides.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

INPUTS = (
    "I am planning a trip to Lisbon in May. My budget is 900 euros. Never book night buses. What should I pack?",
    "For the Lisbon trip, which neighbourhoods are good for walking?",
    "Explain how quicksort partitions an array around a pivot.",
    "What is the worst case of quicksort and how do I avoid it?",
    "Back to Lisbon: is a day trip to Sintra worth it?",
)


async def shoot(out: Path, data_dir: Path) -> list[Path]:

    from app import desktop
    from app.config import Settings
    from app.ui.window import MainWindow

    watched = data_dir / "watched"
    watched.mkdir(parents=True, exist_ok=True)
    settings = Settings.load(data_dir).model_copy(update={"watched_folders": [watched], "coalesce_ms": 200})
    window = MainWindow(settings, desktop.services())
    window.resize(1600, 1000)
    window.show()
    files: list[Path] = []

    async def grab(name: str) -> None:
        # Let the loop run instead of QApplication.processEvents(): under qasync that would run
        # asyncio callbacks inside this task and lose a waiting task's wake-up (it then hangs).
        await asyncio.sleep(0.05)
        path = out / f"{name}.png"
        window.grab().save(str(path))
        files.append(path)
        print(path, flush=True)

    await asyncio.sleep(0.3)
    await grab("01-loading")
    if not await window.controller.load():
        raise SystemExit("models did not load; run `bash scripts/setup.sh` first")
    c = window.controller
    for text in INPUTS:
        window.composer.edit.setPlainText(text)
        window.composer.send.click()
        while c.busy():
            await asyncio.sleep(0.05)
    state = c.state
    assert state is not None
    window.view.fit_all()
    last = state.node_of(state.turn_order[-1])
    window.scene.node_selected.emit(last)
    await asyncio.sleep(0.5)
    await grab("02-canvas")
    await _choose_topic(window, "Lisbon")  # the topic chooser: only the turns that mention Lisbon
    await grab("02b-topic-filter")
    window.toolbar.topic.setCurrentIndex(0)
    tabs = getattr(window.inspector, "tabs", None)
    if tabs is not None:
        for i in range(tabs.count()):
            tabs.setCurrentIndex(i)
            await asyncio.sleep(0.1)
            await grab(f"03-inspector-{i}-{tabs.tabText(i).lower().replace(' ', '-').replace('/', '')}")
    if "conversation" in getattr(window, "docks", {}):  # the selected branch as a conversation
        window.docks["conversation"].raise_()
        await asyncio.sleep(0.2)
        await grab("03b-conversation")
        window.docks["inspector"].raise_()
    # Answer the last input again: a second version of the turn, "Version 2 of 2" with ‹ ›.
    window.canvas_actions.ask_again(last)
    while c.busy():
        await asyncio.sleep(0.05)
    await window.show_turn(state.turn_order[-1])
    tabs is not None and tabs.setCurrentIndex(0)
    await asyncio.sleep(0.3)
    await grab("03c-answer-versions")
    # A streaming answer, caught mid-way.
    # A task, a file it names edited meanwhile, and a question that interrupts it.
    window.composer.edit.setPlainText("Write a step-by-step plan to migrate the blog to a static site; keep notes in migration.md")
    window.composer.send.click()
    while not (c.live and next(iter(c.live.values())).pieces > 12):
        await asyncio.sleep(0.02)
    (watched / "migration.md").write_text("Step 1: export posts as Markdown", encoding="utf-8")
    window.composer.edit.setPlainText("How far along is the migration plan?")
    window.composer.send.click()
    await asyncio.sleep(1.5)
    await grab("04-streaming-task-interruption-env")
    while c.busy():
        await asyncio.sleep(0.05)
    window.view.fit_all()
    await asyncio.sleep(0.3)
    await grab("04b-after-task")
    # A file attached by hand (File › Attach file…, the composer's paperclip), then a new version.
    notes = data_dir / "packing-list.md"
    notes.write_text("# Lisbon packing list\n\nowner: Sam\n- light rain jacket\n- walking shoes\n", encoding="utf-8")
    await window.attach_actions.attach_path(str(notes))
    notes.write_text(notes.read_text(encoding="utf-8") + "- tram 28 day pass\n", encoding="utf-8")
    await window.attach_actions.attach_path(str(notes))
    window.view.fit_all()
    await asyncio.sleep(0.5)
    await grab("04d-attached-file")
    window.view.zoom_by(2.5)  # closer than Fit: the minimap shows the whole and where the view is
    await asyncio.sleep(0.3)
    await grab("04c-minimap")
    window.view.fit_all()
    window.view.zoom_by(0.35)
    await asyncio.sleep(0.2)
    await grab("05-zoomed-out")
    await c.engine.memory_idle()
    window.docks["memory"].raise_()  # what the turns left in memory (across sessions)
    await asyncio.sleep(0.3)
    window.memory.list.setCurrentRow(0)
    await asyncio.sleep(0.2)
    await grab("05b-memory")
    await _add_to_profile(window, "I prefer answers in short bullet points")
    await grab("05c-memory-profile-added")
    await _detail_shots(window, grab)
    window.docks["sessions"].raise_()
    window.view.fit_all()
    window.file_actions.toggle_theme()
    await asyncio.sleep(0.3)
    await grab("06-dark")
    dialog = window.file_actions.open_settings()
    await asyncio.sleep(0.3)
    path = out / "07-settings.png"
    dialog.grab().save(str(path))
    files.append(path)
    print(path, flush=True)
    dialog.reject()
    window.close()
    while not window._shut:
        await asyncio.sleep(0.05)
    return files


CHAT = (  # an imported chat: each line a decision worth keeping, then small talk
    "We move the shop to the new server shop-02 on {day} March; the old one stays up for a week.",
    "The database dump goes to /srv/backup/shop_{k}.sql before each step.",
    "Staging listens on port 84{k:02d}; production stays on 443.",
    "Nice weather today, I had lunch outside.",
    "Invoices are exported as PDF into the folder invoices/{day}-03.",
    "Lena reviews the checkout change number {k} before it ships.",
    "The coffee machine on floor 2 is broken again.",
    "Payments switch to the provider PayFlow from version 2.{k} on.",
)


def _chat(n: int) -> list[Any]:
    """``n`` messages of an imported planning chat between two people."""
    from app.core.types import Author, AuthorKind, Message, Role

    out = []
    for k in range(n):
        who = ("Maya", "Tom")[k % 2]
        text = CHAT[k % len(CHAT)].format(k=k, day=k % 27 + 1)
        out.append(Message(role=Role.USER, author=Author(kind=AuthorKind.USER, id=who, name=who), content=text,
                           at=f"2024-03-{k // 10 + 1:02d}T10:{k % 60:02d}:00Z"))
    return out


async def _detail_shots(window: Any, grab: Callable[[str], Any]) -> None:
    """Progressive detail: a 60-message chat imported as history and summarized, a question on
    its end; the Context tab's Detail row on the summary block, one part made more detailed, a
    node collapsed on the canvas showing its summary. The first session is opened again after."""
    from PySide6.QtWidgets import QScrollArea

    from app.core.types import BlockType

    c, context = window.controller, window.inspector.context
    first = c.session_id
    await c.open_session(None, title="Shop move (imported chat)")
    state = c.state
    await c.engine.ingest(state.session_id, _chat(60))
    await c.engine.summarize(state.session_id)
    end = state.node_of(state.turn_order[-1])
    window.composer.set_anchor(end, "")
    window.composer.edit.setPlainText("Where does the database dump go before each step?")
    window.composer.send.click()
    await _until(lambda: len(state.turn_order) > 60 and not c.busy(), 300)
    asked = state.turn_order[-1]
    await window.show_turn(asked)
    window.docks["inspector"].raise_()
    for name in ("streams", "environment"):  # the inspector gets the whole right column: blocks and Detail row in view
        window.docks[name].hide()
    window.inspector.tabs.setCurrentWidget(context)
    kinds = [b.block_type for b in window.inspector.record.build.context.blocks]
    if BlockType.SUMMARY not in kinds:
        print("detail shots: the question's context has no summary line", kinds, flush=True)
    context.blocks.setCurrentCell(kinds.index(BlockType.SUMMARY) if BlockType.SUMMARY in kinds else 0, 0)
    area = context.findChild(QScrollArea)
    await asyncio.sleep(0.2)
    area.ensureWidgetVisible(context.detail, 0, 40)
    await grab("08-context-detail")
    context.detail.more.click()
    await _until(lambda: bool(window.inspector.record.revisions), 120)
    await asyncio.sleep(0.3)
    area.ensureWidgetVisible(context.detail, 0, 40)
    await grab("08b-context-more-detail")
    for name in ("streams", "environment"):
        window.docks[name].show()
    node = state.node_of(state.turn_order[40])
    window.canvas_actions.node_action("collapse", node)
    await _until(lambda: bool(window.scene.item(node).summary), 60)
    window.scene.select([node])
    window.view.center_on_node(node)
    await asyncio.sleep(0.3)
    await grab("08c-collapsed-summary")
    await c.open_session(first)
    window.statusBar().clearMessage()
    await asyncio.sleep(0.3)


async def _until(test: Callable[[], Any], seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if test():
            return
        await asyncio.sleep(0.05)


async def _choose_topic(window: Any, name: str) -> None:
    """Choose the topic ``name`` in the canvas toolbar once the topic list has it."""
    from PySide6.QtCore import Qt

    topic = window.toolbar.topic
    await _until(lambda: topic.findText(name, Qt.MatchFlag.MatchStartsWith) > 0)
    topic.setCurrentIndex(max(0, topic.findText(name, Qt.MatchFlag.MatchStartsWith)))
    await asyncio.sleep(0.3)


async def _add_to_profile(window: Any, text: str) -> None:
    """Type ``text`` into the Memory dock's profile line and press Enter; wait for its note."""
    panel = window.memory
    panel.profile_box.setText(text)
    panel.profile_box.returnPressed.emit()
    await _until(panel.profile_note.isVisible)
    await asyncio.sleep(0.2)


def run_shots(shoot: Callable[[Path, Path], Any], description: str, prefix: str) -> int:
    """Parse ``--out``, then run ``shoot(out, a throw-away folder)`` on the Qt loop."""
    from app.ui.app import application, run_on_qt_loop

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default="screenshots", help="folder for the PNG files")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    application()
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        files = run_on_qt_loop(shoot(out, Path(tmp)))
    print(f"{len(files)} screenshots in {out}/")
    return 0


def main() -> int:
    return run_shots(shoot, __doc__.split("\n\n")[0], "pcm-shots-")


if __name__ == "__main__":
    sys.exit(main())
