"""The pipeline commands of ``pcm``: ask, show, replay, eval, bench build.

Each command wires an engine (``app.main.build_engine``), runs it on an asyncio loop and closes
it. Kept apart from ``app.cli`` (the parser and the store-only commands) to keep both small.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli_tools import tool_lines
from app.config import Settings
from app.core.engine.ids import resolve_id
from app.core.errors import NoRecordError
from app.core.types import BlockType

if TYPE_CHECKING:  # the engine's modules load when a command runs, not when `pcm` parses its arguments
    from app.core.engine.facade import Engine
    from app.core.pipeline.record import TurnRecord
    from app.core.session.state import SessionState


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _with_engine(
    args: argparse.Namespace,
    work: Callable[[Engine], Awaitable[int]],
    *,
    settings: Settings | None = None,
    **wiring_kw: Any,
) -> int:
    """Wire an engine, run ``work`` on a fresh loop, close the engine whatever happens."""
    from app import main as wiring

    settings = settings or Settings.load(args.data_dir)
    if wiring_kw.get("index", True):
        _err("loading models…")
    engine = wiring.build_engine(settings, **wiring_kw)

    async def run() -> int:
        try:
            report = await engine.start()
            for line in report.lines():  # what an earlier crash left and the start repaired
                _err(f"pcm: {line}")
            return await work(engine)
        finally:
            await engine.close()

    return asyncio.run(run())


def summary(record: TurnRecord) -> str:
    """A few lines: anchor and its runner-up, intent, plan, context use."""
    b = record.build
    routing = b.routing
    cands = routing.get("candidates", [])[:3]
    if b.anchor_node is None:
        anchor = "new task root"
    else:
        anchor = f"continues {b.anchor_node}" + (" (override)" if routing.get("override") else "")
    lines = [f"turn {record.turn_id}: {anchor}" + ("  [ambiguous]" if routing.get("ambiguous") else "")]
    for c in cands:
        lines.append(f"  candidate {c['node_id']}: {c['score']:.3f}")
    if routing.get("clarification"):
        lines.append(f"  clarify? {routing['clarification']}")
    i = b.intent
    conf = i.get("confidence", {})
    lines.append(
        f"intent: {i['mode']} / {i['task_type']} (confidence mode {conf.get('mode', 0):.2f}, "
        f"task {conf.get('task_type', 0):.2f}, goal {conf.get('goal', 0):.2f})"
    )
    p = b.plan
    segments = ", ".join(f"{name} {tokens}" for name, tokens in (p["budget"].get("segments") or {}).items())
    lines.append(
        f"plan: {p['strategy']} recall, top {p['rerank']['top_k']}, budget {p['budget']['total_tokens']} tokens"
        + (f" ({segments})" if segments else "") + ("; needs clarification" if p.get("needs_clarification") else "")
    )
    kept = sum(1 for c in b.recall.candidates if c.kept)
    lines.append(
        f"context: {b.context.tokens}/{b.context.budget} tokens ({b.context.counter}), {len(b.context.blocks)} blocks, "
        f"{kept} of {len(b.recall.candidates)} candidates kept, {len(b.context.dropped)} items dropped; "
        f"build {record.timing.build_ms:.0f} ms"
    )
    lines.extend(input_lines(record))
    lines.extend(precision_lines(record))
    lines.extend(tool_lines(record))
    return "\n".join(lines)


def precision_lines(record: TurnRecord) -> list[str]:
    """What the relevance gate let through, what entered compressed (and what of it was left
    out), and the plan's required information the context misses."""
    b = record.build
    lines = []
    gate = b.recall.gate
    if gate is not None:
        lines.append(f"relevance gate {gate.threshold:.2f}: {gate.passed} of {gate.graded} candidates passed"
                     + (f" ({gate.unlisted} neighbours of weak hits not listed)" if gate.unlisted else "")
                     + ("; evidence insufficient" if gate.insufficient else "")
                     + (f"; not covered: {' | '.join(gate.uncovered)}" if gate.uncovered else ""))
    for cut in b.compressed:
        left = ", ".join(cut.omitted[:4]) + (" …" if len(cut.omitted) > 4 else "")
        lines.append(f"  compressed {cut.evidence_id}: kept {cut.selector} ({cut.kept_units} of {cut.units}); "
                     f"left out {left}")
    missing = [c.name for c in b.required if not c.met]
    if missing:
        lines.append("the plan asked for " + ", ".join(missing) + "; the context has none")
    return lines


#: What a context block of each type carries, as ``used_line`` names it (singular, plural).
USED_KINDS = {
    BlockType.CONVERSATION: ("message of this conversation", "messages of this conversation"),
    BlockType.SUMMARY: ("summary line", "summary lines"),
    BlockType.EVIDENCE: ("recalled item", "recalled items"),
    BlockType.MEMORY: ("note", "notes"),
    BlockType.STATE: ("fact about you or the work", "facts about you or the work"),
}


def used_line(record: TurnRecord, anchor_label: str = "") -> str:
    """One plain line on what a turn used: where routing put it, what its context carries and
    how much of the budget that took (``pcm ask`` prints it before the answer)."""
    b = record.build
    if b.anchor_node is None:
        where = "starts a new branch"
    else:
        label = " ".join(anchor_label.split())
        label = f' "{label[:48].rsplit(" ", 1)[0]}…"' if len(label) > 48 else (f' "{label}"' if label else "")
        where = f"continues{label or ' turn ' + b.anchor_node[:8]}" + (" (as you chose)" if b.routing.get("override")
                                                                        else "")
    counts: dict[BlockType, set[str]] = {}
    for block in b.context.blocks:
        if block.block_type in USED_KINDS:
            counts.setdefault(block.block_type, set()).update(r.evidence_id for r in block.refs)
    parts = [f"{len(ids)} {USED_KINDS[kind][len(ids) != 1]}" for kind, ids in counts.items() if ids]
    used = ", ".join(parts) if parts else "nothing earlier (no turn or note passed the relevance gate)"
    return f"turn {record.turn_id}: {where}; used {used} ({b.context.tokens} of {b.context.budget} tokens)"


def input_lines(record: TurnRecord) -> list[str]:
    """What charging the input did, when it did anything: the context budget it took, and for a
    shortened input what was kept and cut (with the first words of each cut span)."""
    charge = record.build.input
    if charge is None or (not charge.charged and charge.shortened is None):
        return []
    cut = charge.shortened
    if cut is None:
        return [f"input: {charge.tokens} tokens; the context gave up {charge.charged} tokens of its budget "
                f"so that the prompt fits {charge.limit} (context size − answer reserve)"]
    lines = [
        f"input: shortened to fit the model: kept {cut.kept_tokens} of {cut.tokens} tokens — the first {cut.head}, "
        f"the last {cut.tail} and {len(cut.related)} more related of its {cut.units} sentences; "
        f"{cut.cut_words} words cut in {len(cut.cut)} spans (the full text is the stored input message)",
    ]
    text = record.build.text
    for selector in cut.cut:
        start, end = (int(x) for x in selector.removeprefix("chars:").split("-"))
        words = text[start:end].split()
        lines.append(f"  cut {selector} ({len(words)} words): \"{' '.join(words[:8])}{' …' if len(words) > 8 else ''}\"")
    return lines


def answer_failure(record: TurnRecord) -> str | None:
    """One line when the model failed to answer (its error, or a status that says so), else None."""
    if record.finish_reason != "error" and record.usage.get("status") != "error":
        return None
    reason = " ".join(str(record.usage.get("error") or "").split()) or "the model reported an error"
    if record.output:  # a provider failed mid-answer: what streamed is kept, the rest never came
        return f"pcm: error: turn {record.turn_id}: the answer stopped: {reason}"
    return f"pcm: error: turn {record.turn_id} got no answer: {reason}"


def provider_lines(record: TurnRecord, *, always: bool = True) -> list[str]:
    """Who answered (and whether off the machine, at what cost), and what the provider registry
    did on the way (a fallback, a retry, a refused spending limit). Unless ``always``, only when
    there is something to know: notes, a cost, an answer from off the machine."""
    usage = record.usage
    provider = usage.get("provider")
    notes = usage.get("notes") or []
    if not provider or not (always or notes or usage.get("cost") or usage.get("off_machine")):
        return []
    where = ", off the machine" if usage.get("off_machine") else ""
    cost = f", cost {usage['cost']:.4f}" if usage.get("cost") else ""
    return [f"answered by {provider} ({usage.get('model', '')}{where}{cost})", *(f"  {note}" for note in notes)]


def _stored(data_dir: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn(store)`` over the data folder's SQLite store alone (no model, no index), then closed."""
    from app import main as wiring

    store = wiring.open_store(Settings.load(data_dir))
    try:
        return fn(store)
    finally:
        store.close()


def _session_to_continue(args: argparse.Namespace) -> str | None:
    """The session ``ask`` continues: ``--session`` (resolved), else the last used one; None for
    a new session (``--new``, or no session yet)."""
    if args.new:
        return None
    try:
        found: str = _stored(args.data_dir, lambda store: resolve_id(store, "session", args.session or "last"))
    except NoRecordError:
        if args.session:
            raise
        return None
    return found


def cmd_ask(args: argparse.Namespace) -> int:
    session_id = _session_to_continue(args)  # before any model loads: a typo costs nothing

    async def work(engine: Engine) -> int:
        from app.cli_tools import cli_approver

        state = await engine.open_session(session_id, title=args.text[:40])
        engine.set_tool_approver(cli_approver(args.allow_tool))
        await engine.sync_tool_servers(wait_s=args.tool_wait)  # the first turn sees the servers' tools
        if engine.input_kind(state.session_id, args.text) == "task":  # planned, its steps run to the end
            from app.cli_follow import ask_task

            return await ask_task(engine, state.session_id, args.text, budget=args.budget, as_json=args.json)
        return await _ask_turn(engine, state, args)

    return _with_engine(args, work)


async def _ask_turn(engine: Engine, state: SessionState, args: argparse.Namespace) -> int:
    """``pcm ask`` on a turn: its answer streamed (after the line on what it used), its record
    with ``--json``, the provider's lines and a note when the answer stopped at its limit."""
    from app.core.engine.answer_length import CONTINUE_TEXT
    from app.core.pipeline.record import TurnRecord

    stream_out = sys.stderr if args.json else sys.stdout
    held: list[str] | None = None if args.json else []  # pieces that come before the line on what it used

    def show(piece: str) -> None:
        if held is not None:
            held.append(piece)
        else:
            print(piece, end="", file=stream_out, flush=True)

    run = await engine.submit(state.session_id, args.text, budget=args.budget, on_token=show)
    if held is not None:
        built = TurnRecord(turn_id=run.turn_id, session_id=state.session_id, node_id=run.node_id,
                           build=run.build, timing=run.timing)
        anchor = run.build.anchor_node
        label = state.graph.node(anchor).label if anchor and anchor in state.graph else ""
        _err(summary(built) if args.verbose else used_line(built, label))
        print("".join(held), end="", flush=True)
        held = None
    try:
        record = await run.done
    except Exception as exc:  # noqa: BLE001 - the turn is stored; say what failed in one line
        print(file=stream_out)
        _err(f"pcm: error: turn {run.turn_id} got no answer: {' '.join(str(exc).split()) or type(exc).__name__}")
        return 1
    print(file=stream_out)
    if args.json:
        print(json.dumps(record.model_dump(mode="json"), indent=2, ensure_ascii=False))
    failed = answer_failure(record)
    if failed is not None:  # never an empty answer and a zero exit
        _err(failed)
        return 1
    if not args.json:
        for line in provider_lines(record, always=args.verbose):
            _err(line)
        if args.verbose:
            _err(f"session {state.session_id}; first token {record.timing.first_token_ms or 0:.0f} ms")
        if record.finish_reason == "length":
            _err(f"the answer stopped at its limit of {record.params.get('max_tokens')} tokens; "
                 f"`pcm ask \"{CONTINUE_TEXT}\"` continues it")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print a stored turn. Reads SQLite only: no model, no index, no engine."""
    from app.core.pipeline.record import TurnRecord

    row = _stored(args.data_dir, lambda store: store.get_turn(resolve_id(store, "turn", args.turn)))
    if row is None or not row.get("record"):
        raise NoRecordError(f"turn {args.turn!r} has no recorded build (imported history)")
    record = TurnRecord.model_validate(row["record"])
    if args.json:
        print(json.dumps(record.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return 0
    print(summary(record))
    print("--- context sent ---")
    print(record.build.context.text())
    print("--- answer ---")
    print(record.output)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    async def work(engine: Engine) -> int:
        turn_id = await engine.resolve_id("turn", args.turn)
        differences = await engine.replay(turn_id)
        if args.json:
            print(json.dumps({"turn_id": turn_id, "reproduced": not differences, "differences": differences}, indent=2,
                             ensure_ascii=False))
            return 1 if differences else 0
        if differences:
            print(f"turn {turn_id}: {len(differences)} differences")
            for line in differences[:50]:
                print("  " + line)
            return 1
        print(f"turn {turn_id}: plan and context reproduced exactly")
        return 0

    return _with_engine(args, work, chat=False)


def cmd_eval_summaries(args: argparse.Namespace, data_dir: Path) -> int:
    """``pcm eval summaries``: summarize each conversation; retention, compression, coverage, time, cache."""
    import tempfile

    from app.eval.summaries import format_summary_report, run_summary_eval, write_json

    settings = Settings.load(args.data_dir or tempfile.mkdtemp(prefix="pcm-eval-"))

    async def work(engine: Engine) -> int:
        report = await run_summary_eval(engine, data_dir, limit=args.limit, progress=_err)
        print(format_summary_report(report))
        if args.json:
            write_json(report, Path(args.json))
        return 0

    return _with_engine(args, work, settings=settings, chat=not args.no_model, counter="words",
                        prompt_cache=False)


def _eval_problem(args: argparse.Namespace, data_dir: Path) -> str | None:
    """What is missing for ``pcm eval KIND DIR`` (one line), or None."""
    if not args.dir:
        return f"eval {args.kind} needs DIR"
    if not (data_dir / "messages.jsonl").is_file():
        return f"{data_dir}/messages.jsonl not found"
    if args.kind not in ("summaries", "answers") and not args.out:
        return f"eval {args.kind} needs --out PRED.jsonl"
    if args.kind in ("recall", "answers") and not (data_dir / "questions.jsonl").is_file():
        return f"{data_dir}/questions.jsonl not found"
    return None


def _budgets(args: argparse.Namespace) -> list[int] | None:
    """``--budgets`` as numbers (the kind's default when not given); None, said, when malformed."""
    default = "256,512,1024" if args.kind == "purity" else "512,1024,2048,4096"
    try:
        return [int(b) for b in (args.budgets or default).split(",") if b.strip()]
    except ValueError:
        _err(f"pcm: error: --budgets must be comma-separated whole numbers, not {args.budgets!r}")
        return None


def _tuning(args: argparse.Namespace) -> dict[str, float] | None:
    """``--tune`` as {name: weight} ({} when not given); None, said, when malformed or a name is
    not a recall weight."""
    from app.core.context.recall_model import PCM_FUSION

    settings: dict[str, float] = {}
    for pair in (p.strip() for p in (args.tune or "").split(",")):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        try:
            settings[name.strip()] = float(value)
        except ValueError:
            _err(f"pcm: error: --tune takes NAME=NUMBER pairs, comma-separated, not {pair!r}")
            return None
    try:
        PCM_FUSION.tuned(settings)
    except ValueError as exc:
        _err(f"pcm: error: --tune: {exc}")
        return None
    return settings


def _eval_answers(args: argparse.Namespace, data_dir: Path) -> int:
    from app.cli_answers import cmd_eval_answers

    return cmd_eval_answers(args, data_dir, with_engine=_with_engine, say=_err)


def _eval_route(args: argparse.Namespace, data_dir: Path, out: Path) -> int:
    from app import main as wiring
    from app.eval.route import format_route_report, route_stream_eval

    settings = Settings.load(args.data_dir)
    embedder = wiring.load_embedder(settings)
    report = route_stream_eval(data_dir, embedder, out, progress=lambda d, t, s: _err(f"{s}: {d}/{t}") if d == t else None)
    print(format_route_report(report))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """``pcm eval KIND``: the tool filter's own data, the report, or replay over a data folder."""
    from app.cli_tools import cmd_eval_tools

    if args.kind == "report":
        from app.cli_report import cmd_eval_report

        return cmd_eval_report(args)
    return cmd_eval_tools(args) if args.kind == "tools" else cmd_eval_data(args)


def cmd_eval_data(args: argparse.Namespace) -> int:
    """``pcm eval recall|route|purity|summaries DIR``: replay over a folder of dialogue data."""
    data_dir = Path(args.dir or "")
    problem = _eval_problem(args, data_dir)
    if problem is not None:
        _err(f"pcm: error: {problem}")
        return 2
    whole = {"answers": _eval_answers, "summaries": cmd_eval_summaries}.get(args.kind)  # their own commands
    if whole is not None:
        return whole(args, data_dir)
    out = Path(args.out)
    if args.kind == "route":
        return _eval_route(args, data_dir, out)

    from app.eval.purity import format_purity_report, run_purity_eval
    from app.eval.recall import format_recall_report, run_recall_eval

    budgets, tuning = _budgets(args), _tuning(args)
    if budgets is None or tuning is None:
        return 2
    settings = Settings.load(args.data_dir)
    if args.data_dir is None:  # evaluation sessions never go into the user's own data folder
        import tempfile

        settings = Settings.load(tempfile.mkdtemp(prefix="pcm-eval-"))

    # Deadlines off: on a loaded machine an index channel past recall's time limit would be skipped,
    # and the figures would measure the machine's load instead of the contexts (docs/USAGE.md, "The `pcm` command").
    ablate = (*(c.strip() for c in (args.ablate or "").split(",") if c.strip()), "deadlines")

    async def work(engine: Engine) -> int:
        engine.lab().set_ablation(ablate)
        engine.lab().set_tuning(tuning)
        if args.kind == "purity":
            report = await run_purity_eval(engine, data_dir, budgets, out, progress=_err)
            print(format_purity_report(report))
        else:
            report = await run_recall_eval(engine, data_dir, budgets, out, baselines=not args.no_baselines,
                                           progress=_err)
            if args.split_sessions:
                report = await _split(report)
            else:
                print(format_recall_report(report))
        if args.report:
            Path(args.report).write_text(json.dumps(report, indent=2), encoding="utf-8")
        return 0

    counter = args.counter or ("words" if args.kind == "purity" else "model")

    async def _split(single: dict[str, Any]) -> dict[str, Any]:
        from app import main as wiring
        from app.eval.split import format_split_report, run_split_recall_eval

        async def make(folder: Path) -> Engine:
            engine = await asyncio.to_thread(wiring.build_engine, Settings.load(folder), chat=False, counter=counter)
            engine.lab().set_ablation(ablate)
            engine.lab().set_tuning(tuning)
            await engine.start()
            return engine

        split_out = out.with_name(out.stem + ".split" + out.suffix)
        split = await run_split_recall_eval(make, data_dir, budgets, split_out, settings.data_dir / "split",
                                            progress=_err)
        print(format_split_report(single, split))
        return {**single, "split_sessions": split}

    return _with_engine(args, work, settings=settings, chat=False, counter=counter)


def cmd_bench_streams(args: argparse.Namespace) -> int:
    """Concurrent streams on the real model: k parallel inputs, bare vs interruption first token."""
    import tempfile

    from app.eval.bench_runtime import bench_streams, format_streams_report

    settings = Settings.load(args.data_dir or tempfile.mkdtemp(prefix="pcm-bench-"))

    async def work(engine: Engine) -> int:
        report = await bench_streams(engine, k=args.k, n=args.inputs, runs=args.runs, progress=_err)
        print(json.dumps(report, indent=2) if args.json else format_streams_report(report))
        return 0

    return _with_engine(args, work, settings=settings)


def cmd_bench_sensors(args: argparse.Namespace) -> int:
    """A burst of files in a watched folder through the real watchdog sensor and the intake."""
    from app.sensors.bench import measure_file_burst

    print(json.dumps(measure_file_burst(args.files), indent=2))
    return 0


def _bench_histories(args: argparse.Namespace, run: Callable[[Engine, list[int]], Awaitable[dict[str, Any]]],
                     text: Callable[[dict[str, Any]], str], counter: str,
                     again: Callable[[Engine, dict[str, Any]], Awaitable[None]] | None = None) -> int:
    """Run a benchmark over synthetic histories of the ``--turns`` sizes in a throw-away data folder;
    ``again`` adds to the report with a second engine on the same folder (after the first closed)."""
    import tempfile

    sizes = [int(n) for n in args.turns.split(",") if n.strip()]
    settings = Settings.load(args.data_dir or tempfile.mkdtemp(prefix="pcm-bench-"))
    report: dict[str, Any] = {}

    async def work(engine: Engine) -> int:
        report.update(await run(engine, sizes))
        return 0

    async def reopened(engine: Engine) -> int:
        assert again is not None
        await again(engine, report)
        return 0

    code = _with_engine(args, work, settings=settings, chat=False, counter=counter)
    if code == 0 and again is not None:
        code = _with_engine(args, reopened, settings=settings, chat=False, counter=counter)
    print(json.dumps(report, indent=2) if args.json else text(report))
    return code


def cmd_bench_build(args: argparse.Namespace) -> int:
    """Benchmark builds over synthetic histories (``app.eval.bench.bench_build``)."""
    from app.eval.bench import bench_build, bench_reopened, format_bench_report

    tuning = _tuning(args)
    if tuning is None:
        return 2
    return _bench_histories(args, lambda engine, sizes: bench_build(engine, sizes, budget=args.budget, tuning=tuning,
                                                                    progress=_err),
                            format_bench_report, "model",
                            again=lambda engine, report: bench_reopened(engine, report, budget=args.budget))


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    """Benchmark the ingest of synthetic histories (``app.eval.bench.bench_ingest``)."""
    from app.eval.bench import bench_ingest, format_ingest_report

    return _bench_histories(args, lambda engine, sizes: bench_ingest(engine, sizes, progress=_err),
                            format_ingest_report, "words")


def add_parsers(sub: Any) -> None:
    """Register ask / show / replay / eval on the ``pcm`` parser."""
    p = sub.add_parser("ask", help="one turn: plan, route, recall, compile, stream the answer")
    p.add_argument("text")
    p.add_argument("--session", metavar="ID", help="continue this session (an id, its first characters, or "
                   "'last'; default: the last used session)")
    p.add_argument("--new", action="store_true", help="start a new session")
    p.add_argument("--budget", type=int, help="context budget in tokens (default: settings)")
    p.add_argument("--json", action="store_true", help="print the full turn record as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="before the answer, the routing candidates, intent, "
                   "plan and budgets instead of one line on what the turn used; after it, who answered and how fast")
    p.add_argument("--allow-tool", action="append", default=[], metavar="NAME",
                   help="let this tool server's tool (server.tool) run without asking, e.g. memory.create_entities")
    p.add_argument("--tool-wait", type=float, default=30.0, metavar="S",
                   help="seconds to wait for the tool servers to start before building (default 30)")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("show", help="show a recorded turn (reads the store only: no model is loaded)")
    p.add_argument("what", choices=["turn"])
    p.add_argument("turn", metavar="ID", help="a turn id, its first characters, or 'last'")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("replay", help="rebuild a turn's plan and context from the stored state; report differences")
    p.add_argument("what", choices=["turn"])
    p.add_argument("turn", metavar="ID", help="a turn id, its first characters, or 'last'")
    p.add_argument("--json", action="store_true", help="as JSON: {turn_id, reproduced, differences}")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("eval", help="replay evaluation against baselines")
    p.add_argument("kind", choices=["recall", "route", "purity", "summaries", "answers", "documents", "tools",
                                    "followups", "report", "streams"])
    p.add_argument("dir", metavar="DIR", nargs="?",
                   help="a folder in the format of ../shared/data/README.md (documents: the documents and their "
                        "questions.jsonl, e.g. tests/data/documents; tools: registry.json and requests.jsonl, "
                        "default the app's resources/eval/tools; report: OUT, the report's folder)")
    p.add_argument("--out", metavar="PRED.jsonl", help="recall / route / purity / documents: where the predictions go "
                   "(required); tools: each request's offer")
    p.add_argument("--budgets", help="recall / purity / documents / report: comma-separated token budgets "
                                     "(default 512,1024,2048,4096 / 256,512,1024 / 512,1024 / 512,1024,2048)")
    p.add_argument("--counter", choices=["model", "words"],
                   help="recall / purity: count tokens with the chat model's tokenizer or as ceil(1.3 × words) "
                        "(default model / words)")
    p.add_argument("--no-baselines", action="store_true", help="recall: skip the baselines")
    p.add_argument("--ablate", metavar="NAMES", help="recall / purity: close mechanisms (routing, fences, progress, "
                   "template, env, gate, compression, memory, topic, summaries) or recall channels by name")
    p.add_argument("--tune", metavar="NAME=W,...", help="recall / purity: build with these recall weights in place of "
                   "the strategy's: a channel's fusion weight by its name (vector, fulltext, structured, graph, "
                   "recent, memory, topic, time), or asking_discount, sentence_match, length_prior, "
                   "neighbour_alpha; one grid point for python -m app.eval.folds")
    p.add_argument("--split-sessions", action="store_true",
                   help="recall: also ingest each dialogue session (the D<n> of the ids) as its own app session "
                        "of one workspace per conversation and ask from a new session (PRED.split.jsonl)")
    p.add_argument("--report", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--fit", metavar="HALF", help="followups: fit the follow/shift/reply weights on half A or B (on the gold "
                                                 "graph) and report both halves with them")
    p.add_argument("--write", metavar="DIR", help="followups: also write the dev sessions made from LoCoMo to "
                                                  "DIR/sessions.jsonl (keep it outside the repository)")
    p.add_argument("--json", metavar="FILE", help="summaries: write {levels: {brief|standard|detailed: {...}}, "
                                                  "cache_hit_rate} to FILE; answers: {model, n, f1, exact, "
                                                  "by_category, latency, runs, paired, answers}; streams: the "
                                                  "figures and every scenario")
    p.add_argument("--budget", type=int, default=1024, help="answers: the context budget (default 1024)")
    p.add_argument("--models", metavar="A,B", help="answers: chat models to compare, comma-separated (manifest "
                                                   "names, files in models/ or paths; default: the configured one); "
                                                   "report: the answering model")
    p.add_argument("--answers", metavar="locomo10.json", help="answers / report: LoCoMo's original file, for the "
                                                              "gold answers questions.jsonl leaves out")
    p.add_argument("--cache", metavar="FILE", help="answers / report: the answer cache (default: eval-answers.jsonl in the "
                                                   "user cache folder, e.g. ~/.cache/pcm-canvas)")
    p.add_argument("--context-size", type=int, default=4096, help="answers / report: the models' context (default 4096)")
    p.add_argument("--no-model", action="store_true",
                   help="summaries: the extractive summarizer only (no chat model is loaded)")
    p.add_argument("--limit", type=int, metavar="N", help="summaries: only the first N messages of each conversation; "
                                                          "answers: N questions spread evenly over the file; "
                                                          "streams: N scenarios (default 40, a multiple of 5)")
    p.add_argument("--steps", choices=["rules", "model"], default="rules",
                   help="streams: how the scenarios' tasks are planned (default rules; model asks the chat model)")
    from app.cli_report import add_options

    add_options(p)
    p.set_defaults(func=cmd_eval)  # app.cli hands "documents" to app.cli_documents
