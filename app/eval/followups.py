"""``pcm eval followups``: does an input continue the conversation it follows up?

The dev set (``app.eval.followup_data``): single-user sessions of interleaved real conversations.
Each session is replayed ONLINE through the product's own routing: every input is built by
``Engine.build`` on the session as it stands (intent → plan → anchor routing, as a live turn is),
then joins the session as a turn (the input and its recorded answer) continuing the node the
router chose, or as a new root. An input is right when the router put it in the conversation it
belongs to (its anchor is a turn of that conversation), or started a new branch for an input that
starts a conversation: thread accuracy, as ``pcm eval route`` counts it on irc-dev.

``forced`` runs the same builds on the session as the gold routing makes it (every turn joins its
own conversation whatever the router said): the candidates' features then do not depend on the
router's earlier mistakes, which is what ``fit_weights`` needs to fit the follow-up weights
on one half of the sessions and report the other.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

from app.core.engine.facade import Engine
from app.core.pipeline.record import BuildRecord
from app.core.routing.anchor import Feature
from app.core.types import Author, AuthorKind, Message, Role
from app.eval.followup_data import FollowupSession, FollowupTurn

KINDS = ("new", "stay", "return")


def _messages(turn: FollowupTurn) -> list[Message]:
    """The input and its answer, one turn (the answer one second after the input)."""
    at = (datetime.fromisoformat(turn.at) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S")
    return [Message(message_id=turn.id, turn_id=turn.id, role=Role.USER, content=turn.text, at=turn.at,
                    author=Author(kind=AuthorKind.USER)),
            Message(message_id=turn.id + "/answer", turn_id=turn.id, role=Role.ASSISTANT, content=turn.answer,
                    at=at, author=Author(kind=AuthorKind.AGENT, id="assistant"))]


def _row(session: FollowupSession, turn: FollowupTurn, record: BuildRecord, conversation_of: Mapping[str, str],
         predicted: str | None) -> dict[str, Any]:
    """One prediction line: the gold, what the router chose, and every candidate's score."""
    routing = record.routing
    return {
        "id": turn.id, "session": session.id, "half": session.half, "kind": turn.kind, "text": turn.text[:160],
        "gold": None if turn.kind == "new" else turn.conversation, "predicted": predicted,
        "new_root": bool(routing.get("new_root")), "dependence": record.intent.get("dependence", 0.0),
        "candidates": [{"conversation": conversation_of.get(c["node_id"]), "score": c["score"],
                        "components": c["components"]} for c in routing.get("candidates", [])],
    }


async def _session(engine: Engine, session: FollowupSession, *, forced: bool, budget: int,
                   out: IO[str] | None) -> list[dict[str, Any]]:
    """Replay one dev session (see the module doc); return its prediction lines."""
    state = await engine.open_session(None, title=f"eval {session.id}")
    conversation_of: dict[str, str] = {}  # node id → the conversation of its turn
    latest: dict[str, str] = {}  # conversation → the input id of its latest turn
    rows = []
    for turn in session.turns:
        record, _ = await engine.build(state.session_id, turn.text, budget=budget, at=turn.at)
        anchor = record.anchor_node
        predicted = conversation_of.get(anchor) if anchor is not None else None
        row = _row(session, turn, record, conversation_of, predicted)
        rows.append(row)
        if out is not None:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        if forced:
            parent = latest.get(turn.conversation) if turn.kind != "new" else None
        else:
            parent = state.turns[state.graph.node(anchor).ref_id or ""].message_ids[0] if anchor else None
        await engine.ingest(state.session_id, _messages(turn), chain=False, parents={turn.id: parent})
        node = state.node_of(turn.id)
        if node is not None:
            conversation_of[node] = turn.conversation
        latest[turn.conversation] = turn.id
    return rows


async def run_followups(engine: Engine, sessions: Sequence[FollowupSession], *, forced: bool = False,
                        budget: int = 512, out_path: Path | None = None,
                        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Replay ``sessions`` (online, or ``forced`` on the gold graph), write one line per input to
    ``out_path`` and return the report: ``{"sessions", "inputs", "seconds", "forced", "rows",
    "scores": {"all" | "half A" | "half B" | "new" | "stay" | "return": metrics}}``."""
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    out = out_path.open("w", encoding="utf-8") if out_path is not None else None
    try:
        for session in sessions:
            rows += await _session(engine, session, forced=forced, budget=budget, out=out)
            if progress is not None:
                progress(f"{session.id}: {len(session.turns)} inputs routed")
    finally:
        if out is not None:
            out.close()
    return {"sessions": len(sessions), "inputs": len(rows), "forced": forced,
            "seconds": round(time.perf_counter() - started, 1), "rows": rows, "scores": score_rows(rows)}


def score(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Thread accuracy (in %: the predicted conversation is the gold one, or both are "new") and
    new-conversation precision and recall over ``rows``."""
    n = len(rows)
    right = sum(1 for r in rows if r["predicted"] == r["gold"])
    called = [r for r in rows if r["predicted"] is None]
    gold_new = [r for r in rows if r["gold"] is None]
    hit = sum(1 for r in called if r["gold"] is None)
    return {"n": float(n), "thread_acc": 100.0 * right / n if n else 0.0,
            "new_P": 100.0 * hit / len(called) if called else 0.0,
            "new_R": 100.0 * hit / len(gold_new) if gold_new else 0.0}


def score_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``score`` over every row, each half and each kind of input."""
    groups: dict[str, list[Mapping[str, Any]]] = {"all": list(rows)}
    for half in sorted({r["half"] for r in rows}):
        groups[f"half {half}"] = [r for r in rows if r["half"] == half]
    for kind in KINDS:
        groups[kind] = [r for r in rows if r["kind"] == kind]
    return {name: score(group) for name, group in groups.items() if group}


#: The weights ``fit_weights`` fits: what a follow-up and an opening weigh in routing.
FITTED = (Feature.FOLLOW.value, Feature.SHIFT.value, Feature.REPLY.value)


def decide(row: Mapping[str, Any], weights: Mapping[str, float], recorded: Mapping[str, float],
           tau_new: float) -> str | None:
    """The conversation ``row``'s router would choose with ``weights`` for the features named there
    instead of ``recorded`` (those its components were recorded with; none of them 0), or None."""
    best: tuple[float, str | None] | None = None
    for cand in row["candidates"]:
        value = cand["score"]
        for name, weight in weights.items():
            part = float(cand["components"].get(name, 0.0))
            value += part / recorded[name] * weight - part
        if best is None or value > best[0]:
            best = (value, cand["conversation"])
    return best[1] if best is not None and best[0] >= tau_new else None


def fit_weights(rows: Sequence[Mapping[str, Any]], fit_half: str, recorded: Mapping[str, float], tau_new: float,
                grid: Sequence[float]) -> dict[str, Any]:
    """The weights of the ``FITTED`` features (each from ``grid``) with the best thread accuracy on
    the rows of ``fit_half``, recorded by a forced run with the weights ``recorded`` (ties go to the
    smaller sum of weights), and the accuracy they give on each half."""
    def accuracy(weights: Mapping[str, float], half: str) -> float:
        chosen = [r for r in rows if r["half"] == half]
        return 100.0 * sum(decide(r, weights, recorded, tau_new) == r["gold"] for r in chosen) / max(1, len(chosen))

    combos = [dict(zip(FITTED, values, strict=True)) for values in itertools.product(grid, repeat=len(FITTED))]
    best = max(combos, key=lambda w: (accuracy(w, fit_half), -sum(w.values())))
    return {"fit_half": fit_half, "weights": best, "recorded": dict(recorded),
            "accuracy": {half: accuracy(best, half) for half in sorted({r["half"] for r in rows})}}


def format_followups_report(report: Mapping[str, Any]) -> str:
    """A small table of thread accuracy and new-conversation P/R per group of inputs."""
    head = (f"{report['inputs']} inputs in {report['sessions']} sessions"
            f"{' (forced: the gold graph)' if report['forced'] else ''}, {report['seconds']} s")
    lines = [head, f"{'group':<8}{'n':>6}{'thread acc':>12}{'new P':>9}{'new R':>9}"]
    for name, m in report["scores"].items():
        lines.append(f"{name:<8}{int(m['n']):>6}{m['thread_acc']:>11.1f}%{m['new_P']:>8.1f}%{m['new_R']:>8.1f}%")
    return "\n".join(lines)
