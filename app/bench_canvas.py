"""``pcm bench canvas``: how legible the canvas is at 20, 60, 200 and 1,000 turns (issue 33).

Each session is laid out offscreen in a real ``CanvasScene`` and ``CanvasView``
(``app.ui.canvas.legibility.measure``: layout time, overlaps, edges through cards, readable titles
at Fit, coverage of the view, how far cards move when a turn is added). The sessions:

- generated (default): ``--turns`` sizes, each in 3 to 8 interleaved conversations (more for
  larger sizes) with a branch now and then, stored through the engine (``Engine.ingest`` with the
  parents chosen) in a throw-away folder, with the scripted fakes (no model is loaded);
- ``--import FILE``: a session export (``pcm export``), imported into a throw-away folder;
- ``--session ID``: a stored session of the data folder (read, never changed).

Run it as ``pcm bench canvas`` (which starts ``python -m app.bench_canvas`` so the headless CLI
never imports Qt) or directly; it runs offscreen unless ``QT_QPA_PLATFORM`` says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SIZES = (20, 60, 200, 1000)
# Topics of the generated sessions: a name and the words its turns are about.
TOPICS = (
    ("Lisbon", "tram Alfama Sintra hostel ferry museum viewpoint fado beach train bakery tiles"),
    ("Postgres", "index vacuum replica migration query lock backup partition schema pool WAL"),
    ("garden", "tomatoes compost basil watering seedlings mulch trellis aphids greenhouse soil"),
    ("thesis", "chapter citations advisor survey dataset figures abstract defense appendix"),
    ("bike", "chain brakes gears saddle tyres commute helmet derailleur lights pump"),
    ("kitchen", "sourdough starter oven risotto knives spices pantry braise stock dumplings"),
    ("taxes", "receipts deduction invoice pension refund mileage freelance quarterly VAT"),
    ("quicksort", "pivot partition recursion worst-case median heapsort stable inplace benchmark"),
)
TEMPLATES = (
    "How should I handle the {a} and the {b} for {name}?",
    "What about {a} near {b}, given what we said on {name}?",
    "Compare {a} with {b} for the {name} plan, in {n} points.",
    "Is the {a} worth it if the {b} takes {n} hours?",
    "Remind me what we decided on {a} and {b}.",
    "Draft a short note on {a}, {b} and {name}.",
)


def conversations_for(turns: int) -> int:
    """How many conversations a generated session of ``turns`` turns has (3 to 8)."""
    return 3 if turns <= 30 else 4 if turns <= 100 else 6 if turns <= 400 else 8


def generated_messages(turns: int, seed: int = 7, conversations: int | None = None) -> tuple[list[Any], dict[str, str | None]]:
    """``turns`` inputs in interleaved conversations (``conversations``, default
    ``conversations_for(turns)``), and message id → the message it continues
    (None: a new conversation). Conversations start spread over the first half; an input stays
    in the conversation of the one before it a little more often than not, and one in eight
    continues an earlier turn of its conversation (a branch)."""
    from app.core.types import Author, AuthorKind, Message, Role

    rng = random.Random(seed)
    count = conversations or conversations_for(turns)
    starts = {round(j * turns / (2 * count)): j for j in range(count)}
    members: list[list[str]] = [[] for _ in range(count)]
    tips: list[str | None] = [None] * count
    messages, parents = [], {}
    current = 0
    for i in range(turns):
        started = [j for j in range(count) if tips[j] is not None]
        if i in starts:
            current = starts[i]
        elif rng.random() > 0.55 and started:
            current = rng.choice(started)
        name, words = TOPICS[current % len(TOPICS)]
        a, b = rng.sample(words.split(), 2)
        text = rng.choice(TEMPLATES).format(a=a, b=b, name=name, n=rng.randint(2, 9))
        message = Message(role=Role.USER, author=Author(kind=AuthorKind.USER, id="you", name="You"), content=text,
                          at=f"2026-03-{1 + i // 1440:02d}T{(i // 60) % 24:02d}:{i % 60:02d}:00Z")
        branch = members[current] and rng.random() < 0.125
        parents[message.message_id] = rng.choice(members[current][-6:]) if branch else tips[current]
        members[current].append(message.message_id)
        tips[current] = message.message_id
        messages.append(message)
    return messages, parents


def _engine(data_dir: Path, *, real: bool) -> Any:
    """An engine over ``data_dir``: the configured embedder for a stored session (its index must
    stay right), the scripted fakes in a throw-away folder; no chat model either way."""
    from app import main as wiring
    from app.config import Settings

    settings = Settings.load(data_dir)
    if real:
        return wiring.build_engine(settings, chat=False, counter="words")
    from app.core.engine.facade import Engine
    from app.core.ports import WordTokenCounter
    from app.core.runtime.executors import Executors
    from app.llm.fakes import HashEmbedder

    executors = Executors()
    store = executors.pool("store").submit(wiring.open_store, settings).result()
    return Engine(store=store, index=None, embedder=HashEmbedder(dim=64), chat=None, counter=WordTokenCounter(),
                  executors=executors)


async def _measured(engine: Any, session_id: str | None, turns: int, conversations: int | None = None) -> dict[str, Any]:
    from app.ui.canvas.cards import card_texts
    from app.ui.canvas.legibility import measure

    await engine.start()
    try:
        if session_id is None:
            state = await engine.open_session(None, title=f"{turns} generated turns")
            messages, parents = generated_messages(turns, conversations=conversations)
            await engine.ingest(state.session_id, messages, parents=parents)
        else:
            state = await engine.session_state(await engine.resolve_id("session", session_id))  # a prefix, 'last'
        return measure(state.graph, card_texts(state))
    finally:
        await engine.close()


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from app.ui.app import application

    application()
    reports = []
    if args.session:
        data_dir = Path(args.data_dir) if args.data_dir else None
        if data_dir is None:
            from app.config import Settings

            data_dir = Settings.load(None).data_dir
        report = asyncio.run(_measured(_engine(data_dir, real=True), args.session, 0))
        reports.append({"session": args.session, **report})
        return reports
    for size in ([0] if args.import_file else args.turns):
        with tempfile.TemporaryDirectory(prefix="pcm-bench-canvas-") as tmp:
            session_id = _import(Path(tmp), Path(args.import_file)) if args.import_file else None
            report = asyncio.run(_measured(_engine(Path(tmp), real=False), session_id, size, args.conversations))
        label = {"import": Path(args.import_file).name} if args.import_file else {"generated": size}
        reports.append({**label, **report})
    return reports


def _import(data_dir: Path, path: Path) -> str:
    """Import the export at ``path`` into ``data_dir``; returns the new session's id."""
    from app import main as wiring
    from app.config import Settings
    from app.store.docfile import read_document_file
    from app.store.exchange import import_session

    store = wiring.open_store(Settings.load(data_dir))
    try:
        return str(import_session(store, read_document_file(path)))
    finally:
        store.close()


def format_report(reports: Sequence[dict[str, Any]]) -> str:
    lines = ["session            turns convs layout_ms scene_ms overlaps through readable coverage moved(max) /card"]
    for r in reports:
        name = str(r.get("generated") or r.get("import") or r.get("session"))[:18]
        lines.append(f"{name:<18} {r['turns']:>5} {r['conversations']:>5} {r['layout_ms']:>9.1f} {r['scene_ms']:>8.0f} "
                     f"{r['overlaps']:>8} {r['edges_through_cards']:>7} {r['readable_titles']:>8.2f} "
                     f"{r['coverage']:>8.2f} {r['moved_on_add']:>6.1f}({r['moved_on_add_max']:.0f}) {r['card_height']:.0f}")
    lines.append("targets: 0 overlaps, 0 through; readable >= 0.90 at 60 and 200 turns; moved <= one card height; "
                 "layout <= 150 ms at 200 turns, <= 1000 ms at 1,000")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pcm bench canvas", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--session", metavar="ID", help="a stored session of the data folder (read only)")
    source.add_argument("--import", dest="import_file", metavar="FILE", help="a session export to import and measure")
    parser.add_argument("--turns", default=",".join(str(n) for n in SIZES),
                        help="generated session sizes, comma-separated (default 20,60,200,1000)")
    parser.add_argument("--conversations", type=int, help="conversations of each generated session "
                        "(default: 3 up to 30 turns, 4 up to 100, 6 up to 400, else 8)")
    parser.add_argument("--data-dir", help="the data folder of --session (default: the configured one)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    args = build_parser().parse_args(argv)
    args.turns = [int(n) for n in str(args.turns).split(",") if n.strip()]
    reports = run(args)
    print(json.dumps(reports, indent=2) if args.json else format_report(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
