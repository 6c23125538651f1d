"""``pcm eval route``: replay anchor routing on a multi-party chat stream and score it.

Each stream of ``DIR/messages.jsonl`` is routed ONLINE: message *i* sees only messages
*0..i-1* of its own stream. Its candidates are the recent messages, the latest message of every
user it names, the author's own latest message and the latest message that named the author
(the chat-stream analogue of "branch frontiers + recent turns + linked nodes"). Candidate
features (``app.core.routing.anchor.Feature``) are computed from earlier messages only and fused by
``AnchorRouter`` with the ``CHAT_STREAM`` preset; below ``tau_new`` a message starts a new
conversation. The router's own earlier decisions define the threads used by ``focus``.

Texts are embedded in batches up front (embedding a message uses only that message).

With ``DIR/gold.jsonl`` the run is scored like ``../shared/tools/route_eval.py`` (parent accuracy,
thread accuracy, new-conversation precision/recall), next to the previous-message and the
name-mention baselines computed in the same run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.core.ports import Embedder
from app.core.routing.anchor import (
    CHAT_STREAM,
    AnchorCandidate,
    AnchorRouter,
    Feature,
    Mention,
    RoutingDecision,
    RoutingWeights,
    mention,
    mentioned_names,
    normalize_name,
    recency_by_position,
    unit,
)
from app.core.text.words import ROUTING
from app.eval.data import StreamMessage, group_streams, load_route_gold, load_stream_messages

ProgressCallback = Callable[[int, int, str], None]  # (done, total, stage)

#: How strongly a name counts: opening the text ("bob: ...") vs. anywhere in it.
MENTION_STRENGTH: dict[Mention, float] = {Mention.ADDRESS: 1.0, Mention.WORD: 0.7, Mention.NONE: 0.0}
#: ``reply`` of an earlier (not the latest) message that named the author counts this much.
STALE_REPLY = 0.5


@dataclass(frozen=True)
class StreamFeatureConfig:
    """How candidates and features are built for a chat stream (few knobs on purpose)."""

    recent: int = 30  # the last `recent` messages are always candidates
    window: int = 100  # named users' / own / reply-to-me messages are looked up this far back
    half_life: float = 5.0  # position half-life of the recency feature, in messages
    # sem blends the cosine to the line with the cosine to its thread's topic: the mean of the
    # thread's last ``thread_lines`` messages (one message says less about a conversation than
    # its last few); ``thread_mix`` is the topic's share.
    thread_lines: int = 8
    thread_mix: float = 0.5


@dataclass
class _Line:
    """What the router remembers of one earlier message."""

    id: str
    author: str  # normalized
    words: tuple[str, ...]  # ROUTING.words
    thread: int  # line index of the first message of the thread the router put it in


class ChatStreamRouter:
    """Routes the messages of one stream online; feed them in order with ``route``.

    State is built only from messages already routed, so a decision never sees the future.
    """

    def __init__(self, embeddings: np.ndarray, weights: RoutingWeights = CHAT_STREAM,
                 config: StreamFeatureConfig | None = None) -> None:
        self.embeddings = embeddings  # one L2-normalised row per message of the stream, in order
        self.config = config or StreamFeatureConfig()
        self._router = AnchorRouter(weights)
        self.weights = weights
        self._lines: list[_Line] = []
        self._index: dict[str, int] = {}  # message id → line index
        self._latest_by_author: dict[str, int] = {}
        self._latest_naming: dict[str, int] = {}  # author → latest line that named them
        self._thread_tip: dict[int, int] = {}  # thread → its latest line
        self._members: dict[int, list[int]] = {}  # thread → its lines, in order

    def candidates(self, message: StreamMessage) -> list[AnchorCandidate]:
        """Return the candidates for the next ``message`` with their features.

        Candidates: the ``recent`` previous lines, plus (within ``window``) the latest line of
        each user the message names, the author's own latest line and the latest line naming
        the author. Features (see ``app.core.routing.anchor.Feature``):
        recency (position half-life) · sem (clipped cosine to the line, blended with the cosine to
        its thread's topic: ``StreamFeatureConfig.thread_mix``) · address (the message names the
        line's author) · reply (the line named the message's author; full for the latest such
        line, ``STALE_REPLY`` for earlier ones) · author (the author's own latest line) ·
        focus (the tip of the thread the author's latest line was routed into) · conflict (the
        message opens by addressing someone, and this line's author is not among the named).
        """
        i = len(self._lines)
        cfg = self.config
        me = normalize_name(message.author)
        words = ROUTING.words(message.text)
        named = mentioned_names(words, [a for a in self._latest_by_author if a != me])
        addressed = any(kind == Mention.ADDRESS for kind in named.values())
        my_latest = self._latest_by_author.get(me)
        my_namer = self._latest_naming.get(me)
        picks = set(range(max(0, i - cfg.recent), i))
        picks.update(self._latest_by_author[name] for name in named)
        picks.update(j for j in (my_latest, my_namer) if j is not None)
        order = sorted(j for j in picks if i - j <= cfg.window)
        focus_tip = None
        if my_latest is not None:
            focus_tip = self._thread_tip.get(self._lines[my_latest].thread)
        sims = self.embeddings[order] @ self.embeddings[i] if order else np.zeros(0)
        topics = self._topic_sims(order, i)
        out = []
        for j, sim in zip(order, sims):
            line = self._lines[j]
            sem = unit(float(sim))
            if line.thread in topics:
                sem = (1 - cfg.thread_mix) * sem + cfg.thread_mix * topics[line.thread]
            feats = {
                Feature.RECENCY.value: recency_by_position(i - j, cfg.half_life),
                Feature.SEM.value: sem,
            }
            if line.author != me:
                feats[Feature.ADDRESS.value] = MENTION_STRENGTH[named.get(line.author, Mention.NONE)]
                reply = MENTION_STRENGTH[mention(line.words, me)]
                feats[Feature.REPLY.value] = reply if j == my_namer else STALE_REPLY * reply
                feats[Feature.CONFLICT.value] = float(addressed and line.author not in named)
            elif j == my_latest:
                feats[Feature.AUTHOR.value] = 1.0
            if j == focus_tip:
                feats[Feature.FOCUS.value] = 1.0
            out.append(AnchorCandidate.model_construct(node_id=line.id, features=feats,
                                                       group=str(line.thread)))
        return out

    def _topic_sims(self, order: Sequence[int], i: int) -> dict[int, float]:
        """Clipped cosine of line ``i`` to the topic (mean of the last lines) of each thread of ``order``."""
        if self.config.thread_mix <= 0:
            return {}
        out: dict[int, float] = {}
        for thread in {self._lines[j].thread for j in order}:
            rows = self._members.get(thread, [])[-self.config.thread_lines:]
            if rows:
                topic = self.embeddings[rows].mean(axis=0)
                norm = float(np.linalg.norm(topic))
                out[thread] = unit(float(topic @ self.embeddings[i]) / norm) if norm > 0 else 0.0
        return out

    def route(self, message: StreamMessage) -> RoutingDecision:
        """Route ``message`` (the next one of the stream) and remember it for later messages."""
        decision = self._router.route(self.candidates(message))
        i = len(self._lines)
        me = normalize_name(message.author)
        words = ROUTING.words(message.text)
        thread = i
        if decision.anchor_id is not None:
            thread = self._lines[self._index[decision.anchor_id]].thread
        self._lines.append(_Line(id=message.id, author=me, words=words, thread=thread))
        self._index[message.id] = i
        self._thread_tip[thread] = i
        self._members.setdefault(thread, []).append(i)
        for name in mentioned_names(words, [a for a in self._latest_by_author if a != me]):
            self._latest_naming[name] = i
        self._latest_by_author[me] = i
        return decision


# --------------------------------------------------------------------------- running


def route_streams(
    messages: Sequence[StreamMessage],
    embeddings: np.ndarray,
    *,
    weights: RoutingWeights = CHAT_STREAM,
    config: StreamFeatureConfig | None = None,
    progress: ProgressCallback | None = None,
    ambiguous: set[str] | None = None,
) -> dict[str, str | None]:
    """Route every message online, each stream on its own; return id → predicted parent id.

    ``embeddings`` has one row per message of ``messages``. Ids of decisions flagged ambiguous
    (the best guess is still the prediction) are added to ``ambiguous`` when it is given.
    """
    row = {m.id: k for k, m in enumerate(messages)}
    streams = group_streams(list(messages))
    preds: dict[str, str | None] = {}
    done = 0
    for name, lines in streams.items():
        rows = np.asarray([row[m.id] for m in lines], dtype=np.int64)
        router = ChatStreamRouter(embeddings[rows], weights, config)
        for message in lines:
            decision = router.route(message)
            preds[message.id] = decision.anchor_id
            if ambiguous is not None and decision.ambiguous:
                ambiguous.add(message.id)
        done += len(lines)
        if progress is not None:
            progress(done, len(messages), f"routed {name}")
    return preds


def previous_message_baseline(messages: Sequence[StreamMessage]) -> dict[str, str | None]:
    """Always the previous message of the same stream (None for a stream's first message)."""
    preds: dict[str, str | None] = {}
    for lines in group_streams(list(messages)).values():
        for k, message in enumerate(lines):
            preds[message.id] = lines[k - 1].id if k else None
    return preds


def name_mention_baseline(messages: Sequence[StreamMessage], window: int = 100) -> dict[str, str | None]:
    """The latest message of the first user the text names (within ``window``), else the previous."""
    preds: dict[str, str | None] = {}
    for lines in group_streams(list(messages)).values():
        for k, message in enumerate(lines):
            latest: dict[str, int] = {}
            for j in range(max(0, k - window), k):
                latest[normalize_name(lines[j].author)] = j
            me = normalize_name(message.author)
            named = mentioned_names(message.text, [a for a in latest if a != me])
            first = next(iter(named), None)  # dict order = order of appearance in the text
            if first is not None:
                preds[message.id] = lines[latest[first]].id
            else:
                preds[message.id] = lines[k - 1].id if k else None
    return preds


def embed_texts(embedder: Embedder, messages: Sequence[StreamMessage], batch_size: int = 64,
                progress: ProgressCallback | None = None) -> np.ndarray:
    """Embed every message text (actions as "author text") in batches; rows L2-normalised."""
    texts = [(f"{m.author} {m.text}" if m.kind == "action" else m.text) or "." for m in messages]
    chunk = max(batch_size, 512)
    parts = []
    for start in range(0, len(texts), chunk):
        parts.append(np.asarray(embedder.embed(texts[start:start + chunk], batch_size=batch_size),
                                dtype=np.float32))
        if progress is not None:
            progress(min(start + chunk, len(texts)), len(texts), "embedded")
    if not parts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.concatenate(parts)


# --------------------------------------------------------------------------- metrics


def _components(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Connected components (union-find) over ``nodes`` plus every edge end: node → root."""
    parent: dict[str, str] = {n: n for n in nodes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    return {n: find(n) for n in parent}


def _pct(part: int, whole: int) -> float:
    """``part`` as a percentage of ``whole`` (0.0 when ``whole`` is 0)."""
    return 100.0 * part / whole if whole else 0.0


def score_routes(
    messages: Sequence[StreamMessage],
    gold: dict[str, frozenset[str] | None],
    preds: dict[str, str | None],
    only: set[str] | None = None,
) -> dict[str, float]:
    """Parent/thread accuracy and new-conversation P/R/F (in %), as ``route_eval.py`` computes them.

    Thread accuracy: a predicted parent in the gold conversation of the message (components of the
    gold links among scored messages), or a new conversation correctly called. A prediction that is
    not an earlier message of the same stream counts as wrong. ``only`` restricts the messages
    counted (the conversations are still built from all of ``gold``).
    """
    n = acc = thread_ok = tp_new = gold_new = pred_new = 0
    for lines in group_streams(list(messages)).values():
        position = {m.id: k for k, m in enumerate(lines)}
        scored = [m.id for m in lines if m.id in gold]
        edges = [(m, p) for m in scored for p in (gold[m] or ())]
        comp = _components(scored, edges)
        for m in scored:
            if only is not None and m not in only:
                continue
            g = gold[m]
            pr = preds.get(m)
            if pr == m:
                pr = None
            valid = pr is None or (pr in position and position[pr] < position[m])
            n += 1
            gold_new += g is None
            pred_new += pr is None and valid
            if not valid:
                continue
            if g is None:
                acc += pr is None
                tp_new += pr is None
                thread_ok += pr is None
            elif pr is not None:
                acc += pr in g
                thread_ok += comp.get(pr, "\0ctx" + pr) == comp[m]
    new_p, new_r = _pct(tp_new, pred_new), _pct(tp_new, gold_new)
    return {
        "n": float(n),
        "acc": _pct(acc, n),
        "thread_acc": _pct(thread_ok, n),
        "new_P": new_p,
        "new_R": new_r,
        "new_F": 2 * new_p * new_r / (new_p + new_r) if new_p + new_r else 0.0,
        "gold_new": float(gold_new),
        "pred_new": float(pred_new),
    }


# --------------------------------------------------------------------------- the command


def write_predictions(path: Path, messages: Sequence[StreamMessage], preds: dict[str, str | None]) -> int:
    """Write ``{"id", "parent_id"}`` lines for the scored messages; return how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for m in messages:
            if m.scored:
                handle.write(json.dumps({"id": m.id, "parent_id": preds.get(m.id)}) + "\n")
                count += 1
    return count


def route_stream_eval(
    data_dir: Path,
    embedder: Embedder,
    out_path: Path,
    *,
    weights: RoutingWeights | None = None,
    config: StreamFeatureConfig | None = None,
    progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """Route ``data_dir/messages.jsonl`` online, write predictions to ``out_path``, and score.

    Returns ``{"data", "out", "strategy", "embedder", "streams", "messages", "scored",
    "written", "ambiguous", "embed_seconds", "route_seconds", "systems": {name: metrics}}``.
    ``systems`` is empty without ``data_dir/gold.jsonl``; otherwise it holds the router, the
    router on its ambiguous / clear decisions, and the previous-message and name-mention
    baselines, all scored on the same messages (metrics of ``score_routes``).
    """
    data_dir = Path(data_dir)
    messages = load_stream_messages(data_dir / "messages.jsonl")
    w = weights or CHAT_STREAM
    started = time.perf_counter()
    embeddings = embed_texts(embedder, messages, progress=progress)
    embedded = time.perf_counter()
    ambiguous: set[str] = set()
    preds = route_streams(messages, embeddings, weights=w, config=config, progress=progress,
                          ambiguous=ambiguous)
    routed = time.perf_counter()
    written = write_predictions(Path(out_path), messages, preds)
    report: dict[str, Any] = {
        "data": str(data_dir),
        "out": str(out_path),
        "strategy": w.name,
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "streams": len(group_streams(messages)),
        "messages": len(messages),
        "scored": sum(m.scored for m in messages),
        "written": written,
        "ambiguous": sum(1 for m in messages if m.scored and m.id in ambiguous),
        "embed_seconds": round(embedded - started, 3),
        "route_seconds": round(routed - embedded, 3),
        "systems": {},
    }
    gold_path = data_dir / "gold.jsonl"
    if gold_path.is_file():
        gold = load_route_gold(gold_path)
        systems = {"router": score_routes(messages, gold, preds)}
        if ambiguous & set(gold):  # how good the calls flagged for clarification were
            systems["  its ambiguous calls"] = score_routes(messages, gold, preds, only=ambiguous)
            systems["  its clear calls"] = score_routes(messages, gold, preds,
                                                        only=set(gold) - ambiguous)
        systems["previous message"] = score_routes(messages, gold, previous_message_baseline(messages))
        systems["name mention"] = score_routes(messages, gold, name_mention_baseline(messages))
        report["systems"] = systems
    return report


_COLUMNS = (("acc", "parent acc"), ("thread_acc", "thread acc"), ("new_P", "new P"),
            ("new_R", "new R"), ("new_F", "new F"))


def format_route_report(report: dict[str, Any]) -> str:
    """Return a small aligned text table of ``route_stream_eval``'s report."""
    head = (f"{report['scored']} scored messages in {report['streams']} streams; "
            f"{report['written']} predictions written to {report['out']} "
            f"(strategy {report['strategy']})")
    systems: dict[str, dict[str, float]] = report.get("systems") or {}
    if not systems:
        return head + "\nno gold.jsonl: nothing scored"
    width = max(len("system"), *(len(k) for k in systems))
    lines = [head, "system".ljust(width) + f"{'n':>6}" + "".join(f"{label:>12}" for _, label in _COLUMNS)]
    for name, metrics in systems.items():
        cells = "".join(f"{metrics[key]:>11.1f}%" for key, _ in _COLUMNS)
        lines.append(name.ljust(width) + f"{int(metrics['n']):>6}" + cells)
    return "\n".join(lines)
