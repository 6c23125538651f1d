"""Render the canvas of three-topic sessions of 17, 60 and 200 turns into PNG files (issue 33).

Each session is answered turn by turn through the engine (the scripted chat model and embedder,
real SQLite and LanceDB; each input continues the turn the generator chose, so the three topics
interleave and branch now and then) in the real window. The window is then closed and opened again
on the same data folder (a restart: titles, previews, badges and theme must survive it) and
grabbed at Fit (the newest turn's conversation, the others as blocks), at low zoom (every
conversation a block), at reading zoom on a card (focused) and with everything shown, in the
light theme and, after another restart, the dark one. Run by ``bash scripts/screenshots.sh``.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES = (17, 60, 200)
REPLIES = (
    "Start with the cheapest option and keep a day free; the rest can follow once the first part works.",
    "Two things matter here: the order of the steps and what you measure after each one.",
    "Yes, if you plan it for the morning; later it gets crowded and slow.",
    "Keep notes of each decision with its date, so you can tell later why it changed.",
    "Compare them on cost, time and what can go wrong; the second one wins on two of the three.",
    "Short answer: not yet. Finish the step before it first, then come back to this.",
)


def _services() -> Any:
    """The desktop's services, the engine built on the scripted model and embedder."""
    from app import desktop
    from app import main as wiring
    from app.core.engine.facade import Engine
    from app.core.ports import WordTokenCounter
    from app.core.runtime.executors import Executors
    from app.llm.fakes import HashEmbedder, ScriptedChatModel

    def build(settings: Any, progress: Any) -> Engine:
        progress("opening the store (scripted model)")
        executors = Executors()
        store = executors.pool("store").submit(wiring.open_store, settings).result()
        embedder = HashEmbedder(dim=64)
        return Engine(store=store, index=wiring.open_index(settings, embedder), embedder=embedder,
                      chat=ScriptedChatModel(REPLIES), counter=WordTokenCounter(), executors=executors)

    return replace(desktop.services(), build_engine=build)


async def _window(data_dir: Path, theme: str) -> Any:
    from app.config import Settings
    from app.ui.app import application
    from app.ui.theme import apply_theme
    from app.ui.window import MainWindow

    settings = Settings.load(data_dir).model_copy(update={"theme": theme})
    settings.save()
    apply_theme(application(), theme == "dark")  # as the app does when it starts
    window = MainWindow(settings, _services())
    window.resize(1600, 1000)
    window.show()
    if not await window.controller.load():
        raise SystemExit("the engine did not load")
    return window


async def _close(window: Any) -> None:
    window.close()
    while not window._shut:
        await asyncio.sleep(0.05)


async def _fill(window: Any, turns: int) -> str:
    """A new session of ``turns`` answered inputs in three interleaved topics; returns its id."""
    from app.bench_canvas import generated_messages
    from app.core.pipeline.builder import NEW_ROOT

    c = window.controller
    state = await c.open_session(None, title=f"Three topics, {turns} turns")
    node_of: dict[str, str] = {}
    messages, parents = generated_messages(turns, conversations=3)
    for message in messages:
        parent = parents[message.message_id]
        anchor = node_of[parent] if parent is not None else NEW_ROOT
        run = await c.engine.submit(state.session_id, message.content, anchor_override=anchor)
        await run.done
        node_of[message.message_id] = run.node_id
    await c.engine.memory_idle()
    return state.session_id


async def _shoot(out: Path, window: Any, name: str) -> list[Path]:
    from app.ui.canvas.style import BLOCK_SCALE

    view, scene, files = window.view, window.scene, []

    async def grab(shot: str) -> None:
        await asyncio.sleep(0.3)
        path = out / f"canvas-{name}-{shot}.png"
        window.grab().save(str(path))
        files.append(path)
        print(path, flush=True)

    state = window.controller.state
    newest = state.node_of(state.turn_order[-1])
    view.fit_readable(newest)
    await grab("fit")
    view.fit_all()
    if view.scale_factor() >= BLOCK_SCALE:
        view.set_zoom(BLOCK_SCALE * 0.8)
    await grab("low")
    members = dict(scene.layout.conversations())[scene.conversation_of(newest)]
    card = members[len(members) // 2]
    scene.select([card])
    view.fit_readable(card)
    view.set_zoom(0.85, scene.item(card).scene_rect().center())
    await grab("focused")
    view.fit_all()
    await grab("all")
    return files


async def shoot(out: Path, root: Path) -> list[Path]:
    files: list[Path] = []
    for turns in SIZES:
        data_dir = root / f"s{turns}"
        window = await _window(data_dir, "light")
        session_id = await _fill(window, turns)
        await _close(window)
        for theme in ("light", "dark"):  # each one a restart on the same folder
            window = await _window(data_dir, theme)
            await window.controller.open_session(session_id)
            for dock in ("sessions", "memory"):  # the canvas gets the left column: the shots are about it
                window.docks[dock].hide()
            await asyncio.sleep(0.5)
            files += await _shoot(out, window, f"{turns}-{theme}")
            await _close(window)
    return files


def main() -> int:
    from scripts.screenshots import run_shots

    return run_shots(shoot, __doc__.split("\n\n")[0], "pcm-canvas-shots-")


if __name__ == "__main__":
    sys.exit(main())
