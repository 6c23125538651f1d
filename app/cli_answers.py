"""``pcm eval answers``: each question of a LoCoMo-format folder answered by each chat model from
PCM's compiled context, scored (``app.eval.answers``); kept apart from ``app.cli_pipeline``."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from app.config import Settings
from app.core.engine.facade import Engine


def cmd_eval_answers(args: argparse.Namespace, data_dir: Path, *, with_engine: Callable[..., int],
                     say: Callable[[str], None]) -> int:
    """``pcm eval answers``: each question answered by each chat model from PCM's context; F1, exact,
    latency. ``with_engine`` and ``say`` are ``app.cli_pipeline``'s (it calls this)."""
    import tempfile

    from app import main as wiring
    from app.eval import answers as ev

    base = Settings.load(args.data_dir)
    settings = Settings.load(args.data_dir or tempfile.mkdtemp(prefix="pcm-eval-"))
    names = [m.strip() for m in (args.models or base.chat_model).split(",") if m.strip()]
    cache = ev.AnswerCache(Path(args.cache) if args.cache else ev.default_cache_path())
    original = Path(args.answers) if args.answers else None

    async def work(engine: Engine) -> int:
        asked = await ev.compile_questions(engine, data_dir, args.budget, limit=args.limit, original=original,
                                           progress=say)
        if not any(a.gold is not None for a in asked):
            say("pcm: error: no question has a gold answer: give LoCoMo's locomo10.json with --answers FILE")
            return 2
        runs = []
        for name in names:
            chosen = base.model_copy(update={"chat_model": name, "context_size": args.context_size})
            model, load_s = await asyncio.to_thread(ev.timed_load, lambda: wiring.load_chat_model(
                chosen, prompt_cache=False))
            try:
                run = await asyncio.to_thread(ev.run_model, name, model, asked, cache, progress=say)
            finally:
                close = getattr(model, "close", None)
                if callable(close):
                    close()
            run.load_s = load_s
            runs.append(run)
        rep = ev.report(runs, asked, args.budget, cache)
        print(ev.format_answer_report(rep))
        if args.json:
            Path(args.json).write_text(json.dumps(rep, indent=2, ensure_ascii=False), encoding="utf-8")
        return 0

    return with_engine(args, work, settings=settings, chat=False, counter="words")
