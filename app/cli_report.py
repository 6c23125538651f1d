"""``pcm eval report OUT/ --data DIR [--data DIR …]``: the evaluation report, as one command.

Runs every context strategy (PCM, the control systems B1–B3, PCM with each mechanism closed) on
each data folder at every budget, has the chat model answer a sample of the dialogue questions
from each strategy's context, writes the PRED files under ``OUT/pred`` (``app.eval.report_run``),
then ``OUT/index.html`` and ``OUT/summary.json`` from them alone (``app.eval.report_html``).
``--from-pred``, or the same command again while ``OUT/pred`` holds a finished run with the same
settings, only regenerates the page from the PRED files (byte for byte the same). The sessions
go to a throw-away data folder unless ``--data-dir`` is given; answers are cached by context
hash, model and parameters (``--cache``, default the user cache folder), so a second run asks the
model only what it has not answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.config import REPO_ROOT, Settings
from app.core.engine.facade import Engine
from app.core.errors import CoreError
from app.core.ports import ChatModel


class ReportError(CoreError):
    """A report that cannot run as asked (one line)."""


def add_options(p: argparse.ArgumentParser) -> None:
    """The options only ``pcm eval report`` reads (on the ``eval`` parser)."""
    p.add_argument("--data", action="append", metavar="DIR", help="report: a data folder (LoCoMo format: recall, "
                   "answers; irc format: purity); repeat for several")
    p.add_argument("--sample", type=int, metavar="N", help="report: N dialogue questions spread over the file "
                   "(default all)")
    p.add_argument("--answer-sample", type=int, default=40, metavar="N", help="report: of those, N answered by the "
                   "model from PCM's and each control's context at every budget (default 40; 0: none)")
    p.add_argument("--answer-budgets", metavar="B,B", help="report: the budgets the sample is answered at "
                   "(default every budget of --budgets)")
    p.add_argument("--answer-ablations", action="store_true", help="report: also answer from every ablation's context")
    p.add_argument("--stream-sample", type=int, metavar="N", help="report: about N scored stream messages (each "
                   "stream cut after its share; default all)")
    p.add_argument("--conflicts", type=int, default=24, metavar="N", help="report: items of the generated set of "
                   "changed facts (default 24, the whole set; 0: none)")
    p.add_argument("--from-pred", action="store_true", help="report: only regenerate OUT/index.html and "
                   "OUT/summary.json from OUT/pred")
    p.add_argument("--rerun", action="store_true", help="report: run again even when OUT/pred holds a finished run")
    p.add_argument("--provider", metavar="ID", help="report: answer through this configured provider "
                   "(providers.json of the data folder, e.g. a larger model served on a GPU machine)")
    p.add_argument("--threads", type=int, default=1, metavar="N", help="report: llama.cpp threads of the local "
                   "answering model (default 1: on a loaded machine one thread is several times faster than two)")


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def command_line(args: argparse.Namespace) -> str:
    """The command that makes this run, every setting spelled out."""
    parts = ["pcm", "eval", "report", args.dir]
    for folder in args.data or []:
        parts += ["--data", folder]
    parts += ["--budgets", args.budgets or "512,1024,2048", "--answer-sample", str(args.answer_sample),
              "--conflicts", str(args.conflicts), "--threads", str(args.threads), "--context-size", str(args.context_size)]
    for flag, value in (("--sample", args.sample), ("--answer-budgets", args.answer_budgets),
                        ("--stream-sample", args.stream_sample), ("--answers", args.answers),
                        ("--models", args.models), ("--provider", args.provider), ("--data-dir", args.data_dir)):
        if value is not None:
            parts += [flag, str(value)]
    if args.answer_ablations:
        parts.append("--answer-ablations")
    return " ".join(parts)


def _plan(args: argparse.Namespace, model: str) -> Any:
    from app.eval.report_run import ReportPlan
    from app.eval.strategies import STRATEGIES

    budgets = _budgets("--budgets", args.budgets or "512,1024,2048")
    answer_budgets = _budgets("--answer-budgets", args.answer_budgets) if args.answer_budgets else None
    if answer_budgets is not None and not set(answer_budgets) <= set(budgets):
        raise ReportError(f"--answer-budgets {args.answer_budgets} must be among --budgets {','.join(map(str, budgets))}")
    answered = tuple(n for n, s in STRATEGIES.items() if s.kind != "ablation" or args.answer_ablations)
    return ReportPlan(budgets=budgets, sample=args.sample, answer_sample=max(0, args.answer_sample),
                      answer_budgets=answer_budgets,
                      answer_strategies=answered, stream_sample=args.stream_sample, conflicts=max(0, args.conflicts),
                      model=model)


def _budgets(flag: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        raise ReportError(f"{flag} must be comma-separated whole numbers, not {text!r}") from None


def _answerer(args: argparse.Namespace, base: Settings) -> tuple[Callable[[], tuple[ChatModel, str]], str]:
    """What answers (loaded when first needed) and its name: a configured provider, else the local model."""
    if args.provider:
        from app.llm.providers import OpenAICompatibleProvider
        from app.llm.providers.settings import load_providers

        config = load_providers(base.data_dir).get(args.provider)
        if config is None or config.type != "external":
            raise ReportError(f"no served provider {args.provider!r} in {base.data_dir}/providers.json "
                              "(add one with `pcm providers add`)")
        if config.off_machine and not config.off_machine_confirmed:
            raise ReportError(f"provider {args.provider!r} sends prompts off this machine and is not confirmed for it")
        name = f"{config.id}:{config.model}"
        return (lambda: (OpenAICompatibleProvider(config), name)), name
    from app import main as wiring

    name = (args.models or base.chat_model).split(",")[0].strip()
    chosen = base.model_copy(update={"chat_model": name, "context_size": args.context_size, "n_threads": args.threads})
    return (lambda: (wiring.load_chat_model(chosen, prompt_cache=False), name)), name


def _finished_run(pred: Path) -> dict[str, Any] | None:
    path = pred / "run.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def cmd_eval_report(args: argparse.Namespace) -> int:
    from app.eval.report_html import write_report

    out = Path(args.dir or "")
    if not args.dir:
        raise ReportError("eval report needs OUT (the report's folder)")
    pred = out / "pred"
    done = _finished_run(pred)
    if args.from_pred:
        if done is None:
            raise ReportError(f"{pred}/run.json not found: run the report first")
        return _regenerate(out, write_report)
    base = Settings.load(args.data_dir)
    answerer, model = _answerer(args, base)
    plan = _plan(args, model)
    datasets = _datasets(args)
    if done is not None and not args.rerun:
        if done["plan"] == json.loads(json.dumps(_asdict(plan))) and done["datasets"] == datasets:
            print(f"{pred} holds this run's PRED files: regenerating the report from them", file=sys.stderr)
            return _regenerate(out, write_report)
        raise ReportError(f"{pred} holds the PRED files of a run with other settings: give --rerun to replace "
                          "them, or another folder")
    run = _run(args, out, plan, datasets, answerer)
    pred.mkdir(parents=True, exist_ok=True)
    (pred / "run.json").write_text(json.dumps(run, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return _regenerate(out, write_report)


def _asdict(plan: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(plan)


def _datasets(args: argparse.Namespace) -> list[dict[str, str]]:
    from app.eval.report_run import dataset_kind

    if not args.data:
        raise ReportError("eval report needs at least one --data DIR")
    out = []
    for folder in args.data:
        path = Path(folder)
        if not (path / "messages.jsonl").is_file():
            raise ReportError(f"{path}/messages.jsonl not found")
        try:
            out.append({"name": path.name, "kind": dataset_kind(path), "path": str(path)})
        except ValueError as exc:
            raise ReportError(str(exc)) from None
    if len({d["name"] for d in out}) < len(out):
        raise ReportError("two --data folders have the same name")
    return out


def _run(args: argparse.Namespace, out: Path, plan: Any, datasets: list[dict[str, str]],
         answerer: Callable[[], tuple[ChatModel, str]]) -> dict[str, Any]:
    """Run every dataset (``app.eval.report_run.run_all``) and return run.json's content."""
    from app import main as wiring
    from app.eval.answers import AnswerCache, default_cache_path
    from app.eval.report_run import run_all

    root = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="pcm-report-"))

    async def make_engine(name: str) -> Engine:
        engine = await asyncio.to_thread(wiring.build_engine, Settings.load(root / name), chat=False, counter="words")
        await engine.start()
        return engine

    cache = AnswerCache(Path(args.cache) if args.cache else default_cache_path())
    started, load = time.strftime("%Y-%m-%d %H:%M:%S"), os.getloadavg()

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    say(f"report: {', '.join(d['name'] for d in datasets)} into {out}/pred (sessions in {root})")
    result = asyncio.run(run_all(out / "pred", [Path(d["path"]) for d in datasets], plan, make_engine,
                                 answerer=answerer, cache=cache, original=Path(args.answers) if args.answers else None,
                                 say=say))
    end_load = os.getloadavg()
    return {"commit": _git("rev-parse", "HEAD") or "unknown", "dirty": bool(_git("status", "--porcelain", "--", "app")),
            "command": command_line(args), "regenerate": f"pcm eval report {args.dir} --from-pred",
            "started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": f"{os.cpu_count()} cores; load average {load[0]:.1f} at the start, {end_load[0]:.1f} at the end",
            "datasets": datasets, **result}


def _regenerate(out: Path, write: Callable[[Path], dict[str, Any]]) -> int:
    summary = write(out)
    for line in summary_lines(summary):
        print(line)
    print(f"report: {out / 'index.html'} and {out / 'summary.json'}")
    return 0


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """A few lines for the terminal: recall and answer F1 of PCM and the controls, the ablations' verdicts."""
    lines = []
    budgets = [str(b) for b in summary["run"]["plan"]["budgets"]]
    for name, part in summary["dialogue"].items():
        lines.append(f"{name}: recall / answer F1 at {', '.join(budgets)}")
        for strategy in ("pcm", "b1-full", "b2-last-n", "b3-rag"):
            row = part["strategies"].get(strategy)
            if row:
                cells = [f"{_mean(row[b]['recall'])}/{_mean(row[b]['answer_f1'])}" for b in budgets]
                lines.append(f"  {strategy:<10} " + "  ".join(cells))
    for row in summary.get("ablations", []):
        lines.append(f"  without {row['mechanism']:<12} {row['verdict']}"
                     + ("  (costs more than it gives)" if row["costs_more_than_it_gives"] else ""))
    return lines


def _mean(cell: dict[str, Any]) -> str:
    return "–" if cell.get("mean") is None else f"{cell['mean']:.3f}"
