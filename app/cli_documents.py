"""``pcm eval documents DIR`` and ``pcm bench documents``: documents as evidence, measured.

``eval documents`` attaches each document of DIR (with ``questions.jsonl``: qid, file, question,
gold selectors, answer phrase; tests/data/documents is the dev set) to a session of its own and
reports, per budget, the recall of the gold part in the compiled context and how often the answer
is in it, next to a plain fixed-size-chunk RAG baseline on the same documents, embedder and token
counter (``app/eval/documents.py``). ``bench documents`` attaches a 300-page PDF: pages/s, memory,
and a re-ingest after one page changed (``app/eval/bench_documents.py``). Both work in a throw-away
data folder unless ``--data-dir`` is given, and load no chat model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from app.config import Settings


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.load(args.data_dir or tempfile.mkdtemp(prefix="pcm-eval-"))


def cmd_eval_any(args: argparse.Namespace) -> int:
    """``pcm eval KIND DIR``: documents here, follow-ups in ``app.cli_followups``, streams in
    ``app.cli_tasks``, the replay evaluations in ``app.cli_pipeline``."""
    if args.kind == "documents":
        return cmd_eval_documents(args, Path(args.dir))
    if args.kind == "followups":
        from app.cli_followups import cmd_eval_followups

        return cmd_eval_followups(args, Path(args.dir or ""))
    if args.kind == "streams":  # the resident agent's scenarios (no data folder)
        from app.cli_tasks import cmd_eval_streams

        return cmd_eval_streams(args)
    from app.cli_pipeline import cmd_eval

    return cmd_eval(args)


def cmd_eval_documents(args: argparse.Namespace, data_dir: Path) -> int:
    from app.cli_pipeline import _err, _with_engine
    from app.eval.documents import format_documents_report, run_documents_eval

    if not (data_dir / "questions.jsonl").is_file():
        _err(f"pcm: error: {data_dir}/questions.jsonl not found")
        return 2
    if not args.out:
        _err("pcm: error: eval documents needs --out PRED.jsonl")
        return 2
    try:
        budgets = [int(b) for b in (args.budgets or "512,1024").split(",") if b.strip()]
    except ValueError:
        _err(f"pcm: error: --budgets must be comma-separated whole numbers, not {args.budgets!r}")
        return 2

    async def work(engine: Any) -> int:
        engine.lab().set_ablation(("deadlines",))  # the same contexts however loaded the machine is
        report = await run_documents_eval(engine, data_dir, budgets, Path(args.out), progress=_err)
        print(format_documents_report(report))
        if args.report:
            Path(args.report).write_text(json.dumps(report, indent=2), encoding="utf-8")
        return 0

    return _with_engine(args, work, settings=_settings(args), chat=False, counter=args.counter or "words")


def cmd_bench_documents(args: argparse.Namespace) -> int:
    from app.cli_pipeline import _err, _with_engine
    from app.eval.bench_documents import bench_documents, format_documents_bench

    async def work(engine: Any) -> int:
        report = await bench_documents(engine, pages=args.pages, runs=args.runs, say=_err)
        print(json.dumps(report, indent=2) if args.json else format_documents_bench(report))
        return 0

    return _with_engine(args, work, settings=_settings(args), chat=False, counter="words")
