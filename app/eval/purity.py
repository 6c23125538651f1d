"""``pcm eval purity``: how much of a built context comes from the input's own conversation.

A busy channel interleaves several conversations. Each stream of ``DIR/messages.jsonl`` becomes
a session; its messages are routed ONLINE as ``pcm eval route`` routes them
(``app.eval.route.ChatStreamRouter``: message *i* sees only messages *0..i-1*), and for every
scored message the engine builds its context (no generation) at each budget, anchored where the
router put it (a new root when it starts a conversation), with the router's split over the
session's branch trees (``app.core.session.membership``: other trees it hesitated over widen the
context, those it ruled out stay out). Then the message joins the session as a turn continuing
its routed parent (the edge keeps how sure the router was), so the branches are the routed threads.

One line per (message, budget): ``{"id", "budget", "tokens", "blocks": [{"block_type",
"source_ids", "content"}]}``, the format ``../shared/tools/purity_eval.py score`` reads. With
``DIR/gold.jsonl`` the run is scored the same way here (threads are the connected components
of the gold reply links; purity = words of own-thread sources / words of sources with a known
thread; thread recall = share of the thread's last 5 earlier messages carried; leak words;
``empty`` = share of new-conversation contexts without other-thread sources), next to the
baselines computed in the same run with the same word counts: recency, the last 20 messages,
BM25 and the nearest messages by the embedder.

With ``--ablate routing`` (``Ablation.ROUTING``) the router is not asked: every message continues
the one before it, and its context is built there.
"""

from __future__ import annotations

import collections
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.core.engine.facade import Engine
from app.core.pipeline.builder import NEW_ROOT
from app.core.pipeline.summary_items import carried_ids
from app.core.session.membership import RoutedShares, routed_shares
from app.core.types import Ablation, Author, AuthorKind, Message, Role
from app.eval.data import StreamMessage, group_streams, load_stream_messages
from app.eval.recall import LAST_N
from app.eval.route import ChatStreamRouter

WORD = re.compile(r"\w+", re.UNICODE)
LAST = 5  # thread recall looks at the thread's last LAST earlier messages
BM25_WINDOW = 300


def words(text: str) -> int:
    return len(WORD.findall(text or ""))


def est_tokens(text: str) -> int:
    return math.ceil(1.3 * words(text))


def load_gold(path: Path) -> dict[str, list[str]]:
    """message id → the ids it replies to ([] for a new conversation)."""
    out: dict[str, list[str]] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                g = json.loads(line)
                parents = g.get("parent_ids") or ([g["parent_id"]] if g.get("parent_id") else [])
                out[str(g["id"])] = [str(p) for p in parents]
    return out


def threads(messages: Sequence[StreamMessage], gold: Mapping[str, list[str]]) -> dict[str, str]:
    """Message id → its thread (root of the gold reply links), for annotated and linked messages."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for m in messages:
        if m.id not in gold:
            continue
        find(m.id)
        for p in gold[m.id]:
            a, b = find(m.id), find(p)
            if a != b:
                parent[a] = b
    linked = {p for ps in gold.values() for p in ps}
    return {i: find(i) for i in ({m.id for m in messages if m.id in gold} | linked)}


def message_scores(messages: Sequence[StreamMessage], gold: Mapping[str, list[str]],
                   contexts: Mapping[tuple[str, int], Sequence[str]]) -> dict[tuple[str, int], dict[str, float]]:
    """Per (message, budget) of an annotated message: for a reply, ``purity`` (when the context
    cites a message of known thread), ``thread_recall`` and ``leak_words``; for a message that
    starts a conversation, ``empty`` (1.0 when no other thread's message is cited)."""
    th = threads(messages, gold)
    text = {m.id: f"{m.author}: {m.text}" for m in messages}
    order = {m.id: i for i, m in enumerate(messages)}
    earlier: dict[str, list[str]] = {}
    by_thread: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for m in messages:
        t = th.get(m.id)
        if t is not None:
            earlier[m.id] = list(by_thread[(m.stream, t)])
            by_thread[(m.stream, t)].append(m.id)
    out: dict[tuple[str, int], dict[str, float]] = {}
    for (mid, budget), sources in contexts.items():
        if mid not in gold:
            continue
        t = th.get(mid)
        srcs = [s for s in dict.fromkeys(sources) if s != mid and s in order and order[s] < order[mid]]
        own = sum(words(text[s]) for s in srcs if th.get(s) == t)
        other = sum(words(text[s]) for s in srcs if s in th and th[s] != t)
        row: dict[str, float] = {}
        if earlier.get(mid):
            if own + other:
                row["purity"] = own / (own + other)
            row["leak_words"] = float(other)
            last = earlier[mid][-LAST:]
            row["thread_recall"] = sum(1 for s in last if s in srcs) / len(last)
        else:
            row["empty"] = 1.0 if other == 0 else 0.0
        out[(mid, budget)] = row
    return out


def score_contexts(messages: Sequence[StreamMessage], gold: Mapping[str, list[str]],
                   contexts: Mapping[tuple[str, int], Sequence[str]]) -> dict[int, dict[str, float]]:
    """Per budget: purity, thread_recall, leak_words (over replies), empty (over new conversations)."""
    out: dict[int, dict[str, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for (_, budget), scores in message_scores(messages, gold, contexts).items():
        for name, value in scores.items():
            out[budget][name].append(value)
    result: dict[int, dict[str, float]] = {}
    for b, row in sorted(out.items()):
        result[b] = {k: (sum(v) / len(v) if v else float("nan")) for k, v in row.items()}
        result[b]["n_reply"] = float(len(row["thread_recall"]))
        result[b]["n_new"] = float(len(row["empty"]))
    return result


def _bm25_order(query: str, prev: Sequence[StreamMessage]) -> list[str]:
    q = collections.Counter(w.lower() for w in WORD.findall(query))
    docs = [collections.Counter(w.lower() for w in WORD.findall(p.text)) for p in prev]
    n = len(docs) or 1
    avg = sum(sum(d.values()) for d in docs) / n if docs else 1.0
    df = collections.Counter(w for d in docs for w in d)
    scores = []
    for j, d in enumerate(docs):
        dl = sum(d.values()) or 1
        s = sum(math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5)) * d[w] * 2.2 / (d[w] + 1.2 * (0.25 + 0.75 * dl / avg))
                for w in q if w in d)
        scores.append((s, j))
    return [prev[j].id for s, j in sorted(scores, reverse=True) if s > 0]


def _tail(prev: Sequence[StreamMessage], budget: int, cost: Mapping[str, int]) -> list[str]:
    """The latest of ``prev`` that fit ``budget`` together (newest first)."""
    left, pick = budget, []
    for p in reversed(prev):
        if cost[p.id] > left:
            break
        left -= cost[p.id]
        pick.append(p.id)
    return pick


def _fitting(order: Sequence[str], budget: int, cost: Mapping[str, int]) -> list[str]:
    """``order``'s ids that fit ``budget``, best first (one that does not fit is skipped)."""
    left, pick = budget, []
    for mid in order:
        if cost[mid] <= left:
            left -= cost[mid]
            pick.append(mid)
    return pick


def _nearest(m: StreamMessage, prev: Sequence[StreamMessage], vectors: Mapping[str, np.ndarray]) -> list[str]:
    """``prev`` by cosine to ``m`` (rows L2-normalised), nearest first."""
    if not prev:
        return []
    sims = np.asarray([vectors[p.id] for p in prev]) @ np.asarray(vectors[m.id])
    return [prev[j].id for j in np.argsort(-sims, kind="stable")]


def baselines(messages: Sequence[StreamMessage], scored: set[str], budgets: Sequence[int],
              vectors: Mapping[str, np.ndarray] | None = None) -> dict[str, dict[tuple[str, int], list[str]]]:
    """The earlier messages each control's context holds, per (scored message, budget), counted by
    ``est_tokens`` from the stream's last 300: ``recent`` (the latest that fit: full history
    truncated), ``last_n`` (the last ``LAST_N``, the oldest dropped until they fit), ``bm25`` (the
    best matches that fit) and, with ``vectors`` (message id → L2-normalised embedding),
    ``vector`` (the nearest that fit: plain top-k vector RAG)."""
    cost = {m.id: est_tokens(f"{m.author}: {m.text}") for m in messages}
    out: dict[str, dict[tuple[str, int], list[str]]] = {n: {} for n in ("recent", "last_n", "bm25")}
    if vectors is not None:
        out["vector"] = {}
    for lines in group_streams(list(messages)).values():
        for i, m in enumerate(lines):
            if m.id not in scored:
                continue
            prev = lines[max(0, i - BM25_WINDOW):i]
            orders = {"bm25": _bm25_order(m.text, prev)}
            if vectors is not None:
                orders["vector"] = _nearest(m, prev, vectors)
            for b in budgets:
                out["recent"][(m.id, b)] = _tail(prev, b, cost)
                out["last_n"][(m.id, b)] = _tail(prev[-LAST_N:], b, cost)
                for name, order in orders.items():
                    out[name][(m.id, b)] = _fitting(order, b, cost)
    return out


def _message(m: StreamMessage) -> Message:
    return Message(message_id=m.id, role=Role.USER, content=m.text or ".", at=m.ts,
                   author=Author(kind=AuthorKind.USER, id=m.author or "?"))


async def _stream(engine: Engine, lines: Sequence[StreamMessage], vectors: np.ndarray, budgets: Sequence[int],
                  out: Any, contexts: dict[tuple[str, int], list[str]], stats: dict[str, list[float]]) -> None:
    """Route, build and ingest one stream's messages in order (see the module doc). With anchor
    routing ablated (``Ablation.ROUTING`` in the engine's ablations) every message continues the
    one before it, sure of it: the session is one chain."""
    state = await engine.open_session(None, title=f"purity {lines[0].stream}")
    router = ChatStreamRouter(vectors)
    latest = Ablation.ROUTING in engine.lab().ablation()

    def node(mid: str | None) -> str | None:
        view = state.messages.get(mid) if mid is not None else None
        return state.node_of(view.turn_id) if view is not None and view.turn_id else None

    for k, m in enumerate(lines):
        if latest:
            parent, routed = (lines[k - 1].id if k else None), RoutedShares()
        else:
            decision = router.route(m)
            parent = decision.anchor_id
            # how the router split the message over branch trees (``session.membership``): read by
            # the builds, and the chosen tree's share kept on the message's ``continues`` edge
            routed = routed_shares([(n, c.score) for c in decision.candidates if (n := node(c.node_id))],
                                   node(parent), state.graph.root_of, router.weights.tau_new)
        if m.scored:
            anchor = node(parent) or NEW_ROOT
            for budget in budgets:
                record, timing = await engine.build(state.session_id, m.text or ".", budget=budget, at=m.ts,
                                                    anchor_override=anchor, query_vector=vectors[k], routed=routed)
                blocks = [{"block_type": b.block_type.value, "source_ids": carried_ids(record.summaries, b),
                           "content": b.content} for b in record.context.blocks]
                contexts[(m.id, budget)] = [s for b in blocks for s in b["source_ids"]]
                stats["build_ms"].append(timing.build_ms)
                stats[f"tokens@{budget}"].append(record.context.tokens)
                out.write(json.dumps({"id": m.id, "budget": budget, "tokens": record.context.tokens,
                                      "build_ms": round(timing.build_ms, 2), "blocks": blocks},
                                     ensure_ascii=False) + "\n")
        await engine.ingest(state.session_id, [_message(m)], chain=False, parents={m.id: parent},
                            routed={m.id: routed.share} if parent is not None else None)
        await engine.memory_idle()  # its topics and memories, before the next message (as between turns)


def cut_streams(messages: Sequence[StreamMessage], limit: int | None) -> list[StreamMessage]:
    """Each stream up to its first ceil(``limit`` / streams) scored messages (the context before
    them whole): a sample that keeps every stream and the online order; all without a limit."""
    if not limit:
        return list(messages)
    streams = group_streams(list(messages))
    per = -(-limit // len(streams))
    kept: list[StreamMessage] = []
    for lines in streams.values():
        scored = 0
        for m in lines:
            if scored >= per:
                break
            kept.append(m)
            scored += m.scored
    return kept


async def run_purity_eval(engine: Engine, data_dir: Path, budgets: Sequence[int], out_path: Path, *,
                          progress: Callable[[str], None] | None = None, limit: int | None = None,
                          controls: dict[str, dict[tuple[str, int], list[str]]] | None = None) -> dict[str, Any]:
    """Route, build at every budget, write PRED lines, score product and baselines (with gold).
    ``limit``: about that many scored messages (``cut_streams``); ``controls`` receives the
    baselines' contexts (``baselines``), for a report that scores them per message."""
    messages = cut_streams(load_stream_messages(data_dir / "messages.jsonl"), limit)
    started = time.perf_counter()
    texts = [(f"{m.author} {m.text}" if m.kind == "action" else m.text) or "." for m in messages]
    vectors = await engine.embed(texts)
    if vectors is None:
        raise ValueError("eval purity needs the embedder")
    row = {m.id: n for n, m in enumerate(messages)}
    contexts: dict[tuple[str, int], list[str]] = {}
    stats: dict[str, list[float]] = collections.defaultdict(list)
    with out_path.open("w", encoding="utf-8") as out:
        for name, lines in group_streams(messages).items():
            rows = np.asarray([row[m.id] for m in lines], dtype=np.int64)
            await _stream(engine, lines, np.asarray(vectors)[rows], budgets, out, contexts, stats)
            if progress:
                progress(f"{name}: {len(lines)} messages routed and built")
    report: dict[str, Any] = {
        "budgets": list(budgets), "counter": engine.counter_name, "messages": len(messages),
        "scored": sum(m.scored for m in messages), "seconds": round(time.perf_counter() - started, 1),
        "build_ms_p50": round(float(np.median(stats["build_ms"])), 2) if stats["build_ms"] else None,
        "mean_tokens": {str(b): round(float(np.mean(stats[f"tokens@{b}"])), 1) for b in budgets if stats[f"tokens@{b}"]},
        "methods": {},
    }
    gold_path = data_dir / "gold.jsonl"
    if gold_path.is_file():
        gold = load_gold(gold_path)
        methods = {"pcm": score_contexts(messages, gold, contexts)}
        by_id = dict(zip((m.id for m in messages), np.asarray(vectors)))
        for name, ctx in baselines(messages, {m.id for m in messages if m.scored}, budgets, by_id).items():
            methods[name] = score_contexts(messages, gold, ctx)
            if controls is not None:
                controls[name] = ctx
        report["methods"] = {name: {str(b): r for b, r in res.items()} for name, res in methods.items()}
    return report


def format_purity_report(report: dict[str, Any]) -> str:
    """A small table: purity / thread recall / leak words per method and budget."""
    lines = [f"context purity on {report['scored']} scored messages (counter {report['counter']}); "
             f"{report['seconds']} s, build p50 {report['build_ms_p50']} ms"]
    if not report["methods"]:
        return "\n".join(lines + ["no gold.jsonl: nothing scored"])
    lines.append(f"{'method':<8} {'budget':>6} {'purity':>7} {'thread recall':>14} {'leak words':>11} {'empty(new)':>11}")
    for name, per in report["methods"].items():
        for b, r in per.items():
            lines.append(f"{name:<8} {b:>6} {r['purity']:>7.3f} {r['thread_recall']:>14.3f} {r['leak_words']:>11.1f}"
                         f" {r.get('empty', float('nan')):>11.3f}")
    lines.append("mean context tokens: " + ", ".join(f"@{b} {t}" for b, t in report["mean_tokens"].items()))
    return "\n".join(lines)
