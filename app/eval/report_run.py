"""``pcm eval report``'s runs: every context strategy on every dataset, written as PRED files.

What a run computes is written under ``OUT/pred`` and nothing else is read to make the report
(``app.eval.report_summary``), so the report is regenerated exactly from these files:

- ``<dialogue>/<strategy>.jsonl`` — a LoCoMo-format folder (``questions.jsonl``): one line per
  (question, budget) with the context's blocks in the format ``../shared/tools/recall_bench.py
  score`` reads, and the question's figures: ``recall`` (the gold turns carried, as that scorer
  counts them), ``precision`` (the share of cited turns that are gold), ``tokens``, ``build_ms``,
  the category, the conversation's length and how far back its evidence lies (``back``: turns from
  the oldest gold turn to the conversation's end), the prompt's hash (``context``).
- ``<dialogue>/answers/<strategy>.jsonl`` — for the answer sample: the model's answer to that
  prompt and its token F1, exact match and abstention (``app.eval.answers``; answers cached by
  context hash, model and parameters).
- ``<stream>/<strategy>.jsonl`` — an irc-format folder (``gold.jsonl``): one line per (scored
  message, budget) with the sources of its context (``purity_eval.py score``'s format) and its
  purity, thread recall and leak words (``app.eval.purity.message_scores``). PCM routes; its
  routing ablation continues the latest message; the controls are ``purity.baselines``.
- ``conflicts/<strategy>.jsonl`` — the generated set of changed facts (``app.eval.conflicts``):
  one line per (item, budget) with the blocks and the ``exposure`` outcome.
- ``run.json`` — the settings, the commands, the commit, the model and its parameters, timings.

PCM and its ablations are built by the engine (``Engine.build`` after ``lab().set_ablation``;
every build also waits for every recall channel, "deadlines"); a question's builds run back to
back, so their build times are paired on the same load. Each dataset gets a fresh engine in a
folder of its own (``make_engine``), and so does each irc pass: what one run remembers (the
workspace's memories and topics) never reaches another's contexts.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from app.core.context.prompt import SYSTEM_INSTRUCTION
from app.core.engine.facade import Engine
from app.core.pipeline.summary_items import carried_ids
from app.core.ports import ChatModel, GenerationParams, SessionGeneration
from app.core.types import Ablation, Author, AuthorKind, Message, Role
from app.eval.answers import (
    DEFAULT_PARAMS,
    INSTRUCTION,
    AnswerCache,
    Asked,
    context_hash,
    gold_answers,
    run_model,
    spread_sample,
)
from app.eval.conflicts import ConflictItem, conflict_set, exposure
from app.eval.data import load_stream_messages
from app.eval.purity import cut_streams, load_gold, message_scores, run_purity_eval
from app.eval.recall import ingest_conversations, load_dataset, precision, recalled
from app.eval.strategies import B3, PCM, STRATEGIES, Context, Strategy, control_context

Say = Callable[[str], None]
MakeEngine = Callable[[str], Awaitable[Engine]]  # a started engine in a data folder of its own, by name
DEADLINES = Ablation.DEADLINES.value
RANKED = 200  # how deep B3 reads the vector ranking (far more than any budget holds)
#: The controls of a stream dataset: their name in ``purity.baselines``.
STREAM_CONTROLS = {"b1-full": "recent", "b2-last-n": "last_n", "b3-rag": "vector"}


@dataclass
class ReportPlan:
    """What a report runs: budgets, samples, strategies, the answering model."""

    budgets: tuple[int, ...] = (512, 1024, 2048)
    sample: int | None = None  # dialogue questions (spread evenly over the file); None: all
    answer_sample: int = 40  # of those, how many are answered (0: none)
    answer_budgets: tuple[int, ...] | None = None  # the budgets they are answered at; None: every budget
    answer_strategies: tuple[str, ...] = ("pcm", "b1-full", "b2-last-n", "b3-rag")
    stream_sample: int | None = None  # scored stream messages (each stream cut after its share); None: all
    conflicts: int = 24  # items of the generated conflict set (0: none)
    strategies: tuple[str, ...] = tuple(STRATEGIES)
    model: str = ""  # the answering model, as recorded
    params: dict[str, Any] = field(default_factory=lambda: DEFAULT_PARAMS.model_dump(mode="json"))

    def chosen(self, kinds: Sequence[str]) -> list[Strategy]:
        return [STRATEGIES[n] for n in self.strategies if STRATEGIES[n].kind in kinds]


def dataset_kind(folder: Path) -> str:
    """"dialogue" (questions.jsonl: recall and answers) or "stream" (gold.jsonl: purity)."""
    if (folder / "questions.jsonl").is_file():
        return "dialogue"
    if (folder / "gold.jsonl").is_file():
        return "stream"
    raise ValueError(f"{folder}: neither questions.jsonl (dialogue) nor gold.jsonl (stream)")


class PredFiles:
    """One JSON-lines file per strategy under a folder, opened on first write."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._open: dict[str, TextIO] = {}

    def write(self, strategy: str, line: Mapping[str, Any]) -> None:
        out = self._open.get(strategy)
        if out is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            out = self._open[strategy] = (self.folder / f"{strategy}.jsonl").open("w", encoding="utf-8")
        out.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")

    def close(self) -> None:
        for out in self._open.values():
            out.close()
        self._open.clear()


def pcm_blocks(record: Any) -> list[dict[str, Any]]:
    """A build's blocks as PRED lines carry them (a summary line stands for the turns it covers)."""
    return [{"block_id": b.block_id, "block_type": b.block_type.value, "content": b.content,
             "source_ids": carried_ids(record.summaries, b)} for b in record.context.blocks]


async def pcm_context(engine: Engine, strategy: Strategy, session_id: str, text: str, budget: int,
                      at: str | None) -> Context:
    """PCM's build (with ``strategy``'s mechanisms closed) as a ``Context``."""
    engine.lab().set_ablation((*strategy.ablate, DEADLINES))
    record, timing = await engine.build(session_id, text, budget=budget, at=at)
    return Context(pcm_blocks(record), list(record.prompt),
                   record.context.tokens, timing.build_ms)


# --------------------------------------------------------------------------- dialogue (LoCoMo)


@dataclass
class Question:
    """A question of the sample with what its lines carry besides the context."""

    q: dict[str, Any]
    meta: dict[str, Any]
    gold_answer: str | None = None


def _questions(data_dir: Path, plan: ReportPlan, original: Path | None) -> tuple[list[Question], dict[str, str],
                                                                                   dict[str, list[dict[str, Any]]]]:
    """The sampled questions with their meta (category, conversation length, evidence age), the
    turns' texts, and the conversations they need."""
    _, questions, turns, by_conv = load_dataset(data_dir)
    golds = gold_answers(questions, original)
    position = {m["id"]: (conv, i) for conv, rows in by_conv.items() for i, m in enumerate(rows)}
    out = []
    for q in spread_sample(questions, plan.sample):
        size = len(by_conv[q["conversation"]])
        backs = [size - position[g][1] for g in q.get("gold", []) if g in position]
        meta = {"qid": q["qid"], "category": q["category"], "conversation": q["conversation"], "conv_turns": size,
                "back": max(backs) if backs else None}
        out.append(Question(q, meta, golds.get(str(q["qid"]))))
    return out, turns, {c: by_conv[c] for c in dict.fromkeys(x.q["conversation"] for x in out)}


Prompts = dict[tuple[str, int], list[Asked]]  # the answer sample's prompts by (strategy, budget)


async def run_dialogue(engine: Engine, data_dir: Path, out: Path, plan: ReportPlan, *,
                       original: Path | None = None, say: Say = print) -> tuple[Prompts, dict[str, dict[str, Any]]]:
    """Ingest the sampled questions' conversations, build every strategy's context at every
    budget, write the PRED lines; return the answer sample's prompts by (strategy, budget) and
    each question's meta by qid."""
    questions, turns, convs = _questions(data_dir, plan, original)
    sessions = await ingest_conversations(engine, convs, say)
    for state in sessions.values():
        await engine.set_generation(state.session_id, SessionGeneration(system_prompt=INSTRUCTION))
    answered = {x.meta["qid"] for x in spread_sample(questions, plan.answer_sample)} if plan.answer_sample else set()
    asked: Prompts = {}
    files = PredFiles(out)
    try:
        for n, x in enumerate(questions, start=1):
            state = sessions[x.q["conversation"]]
            for strategy, budget, ctx in await _contexts(engine, state, x.q, plan):
                line = {**x.meta, "budget": budget, "tokens": ctx.tokens, "build_ms": round(ctx.build_ms, 2),
                        "recall": recalled(ctx.blocks, x.q["gold"], turns),
                        "precision": precision(ctx.blocks, x.q["gold"], turns),
                        "context": context_hash(ctx.prompt), "blocks": ctx.blocks}
                files.write(strategy.name, line)
                if x.meta["qid"] in answered and strategy.name in plan.answer_strategies and (
                        plan.answer_budgets is None or budget in plan.answer_budgets):
                    asked.setdefault((strategy.name, budget), []).append(
                        Asked(x.meta["qid"], x.meta["category"], x.q["question"], x.gold_answer, ctx.prompt,
                              line["context"], ctx.tokens))
            if n % 10 == 0:
                say(f"{data_dir.name}: {n}/{len(questions)} questions built")
    finally:
        files.close()
        engine.lab().set_ablation((DEADLINES,))
    return asked, {x.meta["qid"]: x.meta for x in questions}


async def _contexts(engine: Engine, state: Any, q: Mapping[str, Any], plan: ReportPlan
                    ) -> list[tuple[Strategy, int, Context]]:
    """Every chosen strategy's context for one question at every budget."""
    out = []
    for strategy in plan.chosen(("pcm", "ablation")):
        for budget in plan.budgets:
            out.append((strategy, budget, await pcm_context(engine, strategy, state.session_id, q["question"], budget,
                                                            q.get("ts"))))
    controls = plan.chosen(("control",))
    ranked: list[str] = []
    rank_ms = 0.0
    if B3 in controls:
        started = time.perf_counter()
        ranked, _ = await engine.lab().index_rankings(q["question"], RANKED, session_id=state.session_id)
        rank_ms = (time.perf_counter() - started) * 1000
    instructions = (SYSTEM_INSTRUCTION, INSTRUCTION)
    for strategy in controls:
        for budget in plan.budgets:
            started = time.perf_counter()
            ctx = control_context(strategy, state, q["question"], instructions=instructions, count=engine.count_tokens,
                                  budget=budget, ranked=ranked)
            ctx.build_ms = (time.perf_counter() - started) * 1000 + (rank_ms if strategy is B3 else 0.0)
            out.append((strategy, budget, ctx))
    return out


def answer_dialogue(model: ChatModel, name: str, asked: Mapping[tuple[str, int], Sequence[Asked]],
                    metas: Mapping[str, Mapping[str, Any]], out: Path, cache: AnswerCache,
                    params: GenerationParams = DEFAULT_PARAMS, say: Say = print) -> None:
    """Every prompt of the answer sample answered by ``model`` (``name`` in the cache key) and
    scored; one line per (question, budget) in ``out/<strategy>.jsonl``."""
    files = PredFiles(out)
    try:
        for (strategy, budget), items in asked.items():
            run = run_model(name, model, items, cache, params)
            for item, row in zip(items, run.rows):
                files.write(strategy, {**metas[item.qid], "budget": budget, "context": item.context, "model": name,
                                       **{k: row[k] for k in ("answer", "gold", "f1", "exact", "abstained", "finish",
                                                              "first_token_ms", "latency_ms", "tokens_per_s")}})
            say(f"answers: {strategy} at {budget} done ({len(items)})")
    finally:
        files.close()


# --------------------------------------------------------------------------- streams (irc)


async def run_stream(make_engine: MakeEngine, data_dir: Path, out: Path, plan: ReportPlan, *,
                     say: Say = print) -> None:
    """PCM (and its routing ablation, when chosen) through ``run_purity_eval`` on engines of their
    own, and the controls; every line scored per message."""
    messages = cut_streams(load_stream_messages(data_dir / "messages.jsonl"), plan.stream_sample)
    gold = load_gold(data_dir / "gold.jsonl")
    stream_of = {m.id: m.stream for m in messages}
    files = PredFiles(out)
    try:
        passes = [s for s in plan.chosen(("pcm", "ablation")) if s is PCM or s.ablate == (Ablation.ROUTING.value,)]
        controls: dict[str, dict[tuple[str, int], list[str]]] = {}
        for strategy in passes:
            engine = await make_engine(f"{data_dir.name}-{strategy.name}")
            try:
                engine.lab().set_ablation((*strategy.ablate, DEADLINES))
                raw = out / f".{strategy.name}.purity.jsonl"
                out.mkdir(parents=True, exist_ok=True)
                await run_purity_eval(engine, data_dir, plan.budgets, raw, progress=say, limit=plan.stream_sample,
                                      controls=controls if strategy is PCM else None)
            finally:
                await engine.close()
            lines = [json.loads(x) for x in raw.read_text(encoding="utf-8").splitlines() if x.strip()]
            raw.unlink()
            _write_scored(files, strategy.name, lines, messages, gold, stream_of)
        for strategy in plan.chosen(("control",)):
            ctx = controls.get(STREAM_CONTROLS[strategy.name], {})
            lines = [{"id": mid, "budget": b, "blocks": [{"source_ids": ids}]} for (mid, b), ids in ctx.items()]
            _write_scored(files, strategy.name, lines, messages, gold, stream_of)
    finally:
        files.close()


def _write_scored(files: PredFiles, name: str, lines: Sequence[dict[str, Any]], messages: Sequence[Any],
                  gold: Mapping[str, list[str]], stream_of: Mapping[str, str]) -> None:
    contexts = {(x["id"], x["budget"]): [s for b in x["blocks"] for s in b.get("source_ids", [])] for x in lines}
    scores = message_scores(messages, gold, contexts)
    for x in lines:
        files.write(name, {**x, "stream": stream_of.get(x["id"], ""), **scores.get((x["id"], x["budget"]), {})})


# --------------------------------------------------------------------------- conflicts


def _conflict_messages(item: ConflictItem) -> list[Message]:
    user = Author(kind=AuthorKind.USER, id="user")
    return [Message(message_id=m["id"], role=Role.USER if m["role"] == "user" else Role.ASSISTANT, content=m["text"],
                    author=user if m["role"] == "user" else None, at=m["at"]) for m in item.messages]


async def run_conflicts(engine: Engine, out: Path, plan: ReportPlan, *, say: Say = print) -> None:
    """Each generated item ingested as a session of its own (the user's statements and the
    replies as history), then every strategy's context for its question, classified."""
    files = PredFiles(out)
    try:
        for item in conflict_set(plan.conflicts):
            state = await engine.open_session(None, title=f"conflict {item.key}")
            await engine.set_generation(state.session_id, SessionGeneration(system_prompt=INSTRUCTION))
            await engine.ingest(state.session_id, _conflict_messages(item))
            await engine.memory_idle()
            for strategy, budget, ctx in await _contexts(engine, state, {"question": item.question, "ts": item.at}, plan):
                files.write(strategy.name, {"id": item.item_id, "key": item.key, "values": list(item.values),
                                            "turns": len(item.messages), "budget": budget, "tokens": ctx.tokens,
                                            "build_ms": round(ctx.build_ms, 2), "outcome": exposure(ctx.blocks, item.values),
                                            "blocks": ctx.blocks})
        say(f"conflicts: {plan.conflicts} items built")
    finally:
        files.close()
        engine.lab().set_ablation((DEADLINES,))


# --------------------------------------------------------------------------- the whole run


async def run_all(out: Path, datasets: Sequence[Path], plan: ReportPlan, make_engine: MakeEngine, *,
                  answerer: Callable[[], tuple[ChatModel, str]] | None = None, cache: AnswerCache | None = None,
                  original: Path | None = None, say: Say = print) -> dict[str, Any]:
    """Every dataset's runs into ``out`` (``OUT/pred``); the answers by ``answerer()`` (the model
    and its name, loaded when first needed). Returns what ``run.json`` records of the run."""
    seconds: dict[str, float] = {}
    notes: list[str] = []
    for folder in datasets:
        started = time.perf_counter()
        if dataset_kind(folder) == "stream":
            await run_stream(make_engine, folder, out / folder.name, plan, say=say)
        else:
            engine = await make_engine(folder.name)
            try:
                asked, metas = await run_dialogue(engine, folder, out / folder.name, plan, original=original, say=say)
            finally:
                await engine.close()
            seconds[f"{folder.name} contexts"] = round(time.perf_counter() - started, 1)
            started = time.perf_counter()
            notes += await _answers(asked, metas, folder, out, plan, answerer, cache, say)
        seconds[folder.name if dataset_kind(folder) == "stream" else f"{folder.name} answers"] = round(
            time.perf_counter() - started, 1)
    if plan.conflicts:
        started = time.perf_counter()
        engine = await make_engine("conflicts")
        try:
            await run_conflicts(engine, out / "conflicts", plan, say=say)
        finally:
            await engine.close()
        seconds["conflicts"] = round(time.perf_counter() - started, 1)
    return {"plan": asdict(plan), "seconds": seconds, "notes": notes,
            "cache": {"hits": cache.hits, "misses": cache.misses} if cache is not None else None}


async def _answers(asked: Prompts, metas: Mapping[str, Mapping[str, Any]], folder: Path, out: Path, plan: ReportPlan,
                   answerer: Callable[[], tuple[ChatModel, str]] | None, cache: AnswerCache | None,
                   say: Say) -> list[str]:
    """The answer phase of a dialogue dataset (a note says why it was skipped)."""
    if not asked:
        return []
    if answerer is None or cache is None:
        return [f"{folder.name}: no answers (no answering model)"]
    if not any(a.gold is not None for items in asked.values() for a in items):
        return [f"{folder.name}: no answers: no question has a gold answer (give LoCoMo's locomo10.json with --answers)"]
    model, name = await asyncio.to_thread(answerer)
    params = GenerationParams.model_validate(plan.params)
    await asyncio.to_thread(answer_dialogue, model, name, asked, metas, out / folder.name / "answers", cache, params, say)
    return []
