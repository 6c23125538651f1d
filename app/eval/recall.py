"""``pcm eval recall``: evidence recall@budget of the compiled context against baselines.

Each conversation of DIR/messages.jsonl is ingested into its own fresh session as history (no
generation); then, for each question of DIR/questions.jsonl and each budget, the engine builds
the context (no generation) and one line is written per (question, budget):
``{"qid", "budget", "tokens", "build_ms", "rounds" (2: the retrieval loop ran again), "blocks":
[{"block_id", "block_type", "priority", "content", "source_ids"}]}``. Baselines run in the same
command over the same data, index and token counter: most recent turns that fit, last-N turns,
top-k vector, BM25, hybrid RRF.

Scoring follows ../shared/tools/recall_bench.py: a gold turn counts when a block lists its id
AND the block's content holds at least half of that turn's words. Also reported per budget:
context precision (the share of the dataset turns a context cites that are gold, averaged over
questions whose context cites any), the mean prompt tokens of the product (context, input and
chat template), and how often the context says the evidence is insufficient — for the
adversarial questions (about things that never happened) and for the others.
"""

from __future__ import annotations

import collections
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from app.core.context.ranking import ranked, rrf
from app.core.context.sections.gate_notes import INSUFFICIENT
from app.core.engine.facade import Engine
from app.core.pipeline.summary_items import carried_ids
from app.core.session.state import SessionState
from app.core.types import Author, AuthorKind, Message, Role

BASELINES = ("recent", "last_n", "vector", "bm25", "hybrid_rrf")
Count = Callable[[str], int]  # text → tokens
LAST_N = 20
_WORD = re.compile(r"[a-z0-9]+")


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_dataset(data_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str],
                                           dict[str, list[dict[str, Any]]]]:
    """DIR's messages and questions, each message's text by id, and the messages by conversation."""
    messages = load_jsonl(data_dir / "messages.jsonl")
    by_conv: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for m in messages:
        by_conv[m["conversation"]].append(m)
    return messages, load_jsonl(data_dir / "questions.jsonl"), {m["id"]: m["text"] for m in messages}, by_conv


def _bag(text: str) -> collections.Counter[str]:
    return collections.Counter(_WORD.findall(text.lower()))


def recalled(blocks: Sequence[dict[str, Any]], gold: Iterable[str], turns: dict[str, str]) -> float:
    """Fraction of gold turns carried by a block that lists the id and holds ≥ half its words."""
    gold = list(gold)
    got: set[str] = set()
    for block in blocks:
        have = _bag(block.get("content", ""))
        for sid in block.get("source_ids", []):
            words = _bag(turns.get(sid, ""))
            if words and sum(min(c, have[w]) for w, c in words.items()) >= 0.5 * sum(words.values()):
                got.add(sid)
    return len(set(gold) & got) / len(gold) if gold else 0.0


def precision(blocks: Sequence[dict[str, Any]], gold: Iterable[str], turns: dict[str, str]) -> float | None:
    """Share of the dataset turns the blocks cite that are gold (None when they cite none)."""
    cited = {sid for block in blocks for sid in block.get("source_ids", []) if sid in turns}
    return len(cited & set(gold)) / len(cited) if cited else None


def insufficient(blocks: Sequence[dict[str, Any]]) -> bool:
    """True when the context says the evidence is insufficient (the relevance gate's note)."""
    return any(INSUFFICIENT in block.get("content", "") for block in blocks)


def summarize(rows: Sequence[tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for cat in sorted({c for c, _ in rows}):
        vals = [v for c, v in rows if c == cat]
        out[cat] = sum(vals) / len(vals)
    core = [v for c, v in rows if c != "adversarial"]
    out["overall"] = sum(core) / len(core) if core else float("nan")
    return out


def _packed(order: Sequence[str], state: SessionState, count: Count, budget: int) -> list[dict[str, Any]]:
    """A baseline's context: whole turns "Speaker: text" in rank order while they fit (``count``:
    the engine's token counter)."""
    blocks, used = [], 0
    for mid in order:
        text = state.messages[mid].render()
        cost = count(text)
        if used + cost <= budget:
            used += cost
            blocks.append({"block_id": mid, "block_type": "evidence", "priority": "medium", "content": text, "source_ids": [mid]})
    return blocks


def _recent(state: SessionState, count: Count, budget: int) -> list[dict[str, Any]]:
    blocks, used = [], 0
    for mid in reversed(state.order):
        text = state.messages[mid].render()
        cost = count(text)
        if used + cost > budget:
            break
        used += cost
        blocks.append({"block_id": mid, "block_type": "conversation", "priority": "medium", "content": text, "source_ids": [mid]})
    return blocks[::-1]


async def baseline_orders(engine: Engine, state: SessionState, question: str, k: int) -> dict[str, list[str]]:
    """Rank orders of the retrieval baselines over the engine's own index."""
    vector, bm25 = await engine.lab().index_rankings(question, k, session_id=state.session_id)
    hybrid = ranked(rrf({"vector": vector, "bm25": bm25}))
    return {"vector": vector, "bm25": bm25, "hybrid_rrf": hybrid, "last_n": list(reversed(state.order[-LAST_N:]))}


async def ingest_conversations(engine: Engine, by_conv: dict[str, list[dict[str, Any]]],
                               progress: Callable[[str], None] | None = None) -> dict[str, SessionState]:
    """Each conversation ingested as the history of its own fresh session; conversation → session."""
    sessions: dict[str, SessionState] = {}
    for conv, rows in by_conv.items():
        state = await engine.open_session(None, title=f"eval {conv}")
        await engine.ingest(
            state.session_id,
            [
                Message(message_id=r["id"], role=Role.USER, content=r["text"], author=Author(kind=AuthorKind.USER, id=r["author"]), at=r["ts"])
                for r in rows
            ],
        )
        sessions[conv] = state
        await engine.memory_idle()  # the memory writer and the topic index read the history first
        if progress:
            progress(f"ingested {conv}: {len(rows)} turns")
    return sessions


async def run_recall_eval(
    engine: Engine,
    data_dir: Path,
    budgets: Sequence[int],
    out_path: Path,
    *,
    baselines: bool = True,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Ingest, build at every budget, write PRED lines, score product and baselines."""
    messages, questions, turns, by_conv = load_dataset(data_dir)
    started = time.perf_counter()
    sessions = await ingest_conversations(engine, by_conv, progress)
    ingest_s = time.perf_counter() - started
    scores: dict[str, dict[int, list[tuple[str, float]]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    precise: dict[str, dict[int, list[tuple[str, float]]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    prompt_tokens: dict[int, list[int]] = collections.defaultdict(list)
    flagged: dict[int, list[tuple[str, float]]] = collections.defaultdict(list)
    build_ms: list[float] = []
    over = second = 0
    with out_path.open("w", encoding="utf-8") as out:
        for n, q in enumerate(questions, start=1):
            state = sessions[q["conversation"]]
            orders = await baseline_orders(engine, state, q["question"], 200) if baselines else {}
            for budget in budgets:
                record, timing = await engine.build(state.session_id, q["question"], budget=budget, at=q.get("ts"))
                build_ms.append(timing.build_ms)
                blocks = [
                    {"block_id": b.block_id, "block_type": b.block_type.value, "priority": b.priority.value,
                     "content": b.content, "source_ids": carried_ids(record.summaries, b)}
                    for b in record.context.blocks
                ]
                over += record.context.tokens > budget
                second += record.recall.rounds > 1
                line = {"qid": q["qid"], "budget": budget, "tokens": record.context.tokens, "build_ms": round(timing.build_ms, 2),
                        "rounds": record.recall.rounds, "blocks": blocks}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
                scores["pcm"][budget].append((q["category"], recalled(blocks, q["gold"], turns)))
                _precision(precise["pcm"][budget], q, blocks, turns)
                charge = record.input
                prompt_tokens[budget].append(record.context.tokens + (charge.tokens + charge.template if charge else 0))
                flagged[budget].append((q["category"], 1.0 if insufficient(blocks) else 0.0))
                if baselines:
                    base = {"recent": _recent(state, engine.count_tokens, budget)}
                    for name, order in orders.items():
                        base[name] = _packed(order, state, engine.count_tokens, budget)
                    for name, blocks_b in base.items():
                        scores[name][budget].append((q["category"], recalled(blocks_b, q["gold"], turns)))
                        _precision(precise[name][budget], q, blocks_b, turns)
            if progress and n % 50 == 0:
                progress(f"{n}/{len(questions)} questions")
    build_ms.sort()
    return {
        "budgets": list(budgets),
        "counter": engine.counter_name,
        "questions": len(questions),
        "turns": len(messages),
        "ingest_s": round(ingest_s, 2),
        "build_ms_p50": round(build_ms[len(build_ms) // 2], 2) if build_ms else None,
        "build_ms_p95": round(build_ms[int(len(build_ms) * 0.95)], 2) if build_ms else None,
        "over_budget": over,
        "second_round": round(second / len(build_ms), 4) if build_ms else 0.0,  # share of builds the loop ran again
        "methods": {name: {str(b): summarize(rows) for b, rows in per.items()} for name, per in scores.items()},
        "precision": {name: {str(b): summarize(rows) for b, rows in per.items()} for name, per in precise.items()},
        "prompt_tokens": {str(b): round(sum(v) / len(v), 1) for b, v in prompt_tokens.items() if v},
        "insufficient": {str(b): {"adversarial": _share(rows, adversarial=True), "others": _share(rows, adversarial=False)}
                         for b, rows in flagged.items()},
    }


def _precision(rows: list[tuple[str, float]], q: dict[str, Any], blocks: Sequence[dict[str, Any]],
               turns: dict[str, str]) -> None:
    value = precision(blocks, q["gold"], turns)
    if value is not None:
        rows.append((q["category"], value))


def _share(rows: Sequence[tuple[str, float]], *, adversarial: bool) -> float:
    vals = [v for c, v in rows if (c == "adversarial") == adversarial]
    return round(sum(vals) / len(vals), 4) if vals else float("nan")


def format_recall_report(report: dict[str, Any]) -> str:
    budgets = [str(b) for b in report["budgets"]]
    lines = [
        f"evidence recall@budget (overall = all categories but adversarial; counter: {report['counter']})",
        f"{'method':<12} " + " ".join(f"{b:>7}" for b in budgets),
    ]
    for name in ["pcm", *BASELINES]:
        if name in report["methods"]:
            row = report["methods"][name]
            lines.append(f"{name:<12} " + " ".join(f"{row[b]['overall']:7.3f}" for b in budgets))
    cats = sorted({c for row in report["methods"].get("pcm", {}).values() for c in row if c != "overall"})
    if cats:
        lines.append("pcm by category:")
        for cat in cats:
            lines.append(f"  {cat:<12} " + " ".join(f"{report['methods']['pcm'][b].get(cat, float('nan')):7.3f}" for b in budgets))
    if report.get("precision"):
        lines.append("context precision (share of cited turns that are gold):")
        for name in ["pcm", *BASELINES]:
            if name in report["precision"]:
                row = report["precision"][name]
                lines.append(f"  {name:<10} " + " ".join(f"{row[b]['overall']:7.3f}" if b in row else "    nan"
                                                         for b in budgets))
    if report.get("prompt_tokens"):
        lines.append("pcm mean prompt tokens:    " + " ".join(f"{report['prompt_tokens'].get(b, float('nan')):7.1f}"
                                                             for b in budgets))
    if report.get("insufficient"):
        rows = report["insufficient"]
        lines.append("pcm flagged insufficient:  adversarial " + " ".join(f"{rows[b]['adversarial']:.3f}" for b in budgets)
                     + "; others " + " ".join(f"{rows[b]['others']:.3f}" for b in budgets))
    lines.append(
        f"{report['questions']} questions over {report['turns']} turns; ingest {report['ingest_s']} s; "
        f"build p50 {report['build_ms_p50']} ms, p95 {report['build_ms_p95']} ms; over budget: {report['over_budget']}"
        + (f"; a second retrieval round in {report['second_round']:.1%} of builds" if "second_round" in report else "")
    )
    return "\n".join(lines)
