"""``pcm eval recall DIR --split-sessions``: recall across sessions.

Each conversation of DIR is one user's workspace (its own data folder): every dialogue session of
it (the ``D<n>`` part of the ids, "conv-26/D3:7" → D3) is ingested as an app session of its own,
titled by its date. Each question is then asked from a new, empty session of that workspace, with
the plan free to choose the recall scope (an empty session searches the workspace). Scoring is
``app.eval.recall``'s: a gold turn counts when a block lists its id and carries half its words.

The command prints these figures next to the same run's single-session ones (every conversation
in one session, ``run_recall_eval``) and its baselines.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from app.core.engine.facade import Engine
from app.core.types import Author, AuthorKind, Message, Role
from app.eval.recall import insufficient, load_dataset, precision, recalled, summarize

_SESSION = re.compile(r"/(D\d+):")

#: Builds and starts an engine over the given data folder (the caller closes it).
EngineMaker = Callable[[Path], Awaitable[Engine]]


def dialogue_session(message_id: str) -> str:
    """The dialogue session of a LoCoMo-style id ("conv-26/D3:7" → "D3"; "" when it has none)."""
    found = _SESSION.search(message_id)
    return found.group(1) if found else ""


async def _ingest(engine: Engine, rows: Sequence[dict[str, Any]]) -> int:
    """One app session per dialogue session, in the order they happened; returns how many."""
    parts: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in rows:
        parts[dialogue_session(r["id"])].append(r)
    for name, part in sorted(parts.items(), key=lambda p: p[1][0]["ts"]):
        state = await engine.open_session(None, title=part[0]["ts"][:10])  # as a user names a day's session
        await engine.ingest(state.session_id, [
            Message(message_id=r["id"], role=Role.USER, content=r["text"],
                    author=Author(kind=AuthorKind.USER, id=r["author"]), at=r["ts"]) for r in part])
    return len(parts)


async def run_split_recall_eval(make_engine: EngineMaker, data_dir: Path, budgets: Sequence[int], out_path: Path,
                                root: Path, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Ingest each conversation's sessions into its own workspace, ask from a new session, score."""
    _, questions, turns, by_conv = load_dataset(data_dir)
    scores: dict[int, list[tuple[str, float]]] = collections.defaultdict(list)
    precise: dict[int, list[tuple[str, float]]] = collections.defaultdict(list)
    flagged: dict[int, list[tuple[str, float]]] = collections.defaultdict(list)
    scopes: collections.Counter[str] = collections.Counter()
    sessions = 0
    with out_path.open("w", encoding="utf-8") as out:
        for conv, rows in by_conv.items():
            engine = await make_engine(root / conv)
            try:
                sessions += await _ingest(engine, rows)
                await engine.memory_idle()
                asker = await engine.open_session(None, title=f"{conv} questions")
                for q in (q for q in questions if q["conversation"] == conv):
                    for budget in budgets:
                        record, _ = await engine.build(asker.session_id, q["question"], budget=budget, at=q.get("ts"))
                        scopes[record.plan["retrieval"]["scope"]] += 1
                        blocks = [{"block_id": b.block_id, "block_type": b.block_type.value, "content": b.content,
                                   "source_ids": [r.evidence_id for r in b.refs]} for b in record.context.blocks]
                        out.write(json.dumps({"qid": q["qid"], "budget": budget, "tokens": record.context.tokens,
                                              "blocks": blocks}, ensure_ascii=False) + "\n")
                        scores[budget].append((q["category"], recalled(blocks, q["gold"], turns)))
                        value = precision(blocks, q["gold"], turns)
                        if value is not None:
                            precise[budget].append((q["category"], value))
                        flagged[budget].append((q["category"], 1.0 if insufficient(blocks) else 0.0))
            finally:
                await engine.close()
            if progress:
                progress(f"split sessions: {conv} done")
    return {
        "sessions": sessions,
        "scopes": dict(scopes),
        "recall": {str(b): summarize(rows) for b, rows in scores.items()},
        "precision": {str(b): summarize(rows) for b, rows in precise.items()},
    }


def format_split_report(single: dict[str, Any], split: dict[str, Any]) -> str:
    """The split-session row under the same run's single-session table."""
    from app.eval.recall import format_recall_report

    budgets = [str(b) for b in single["budgets"]]
    lines = [format_recall_report(single), "",
             f"split sessions ({split['sessions']} app sessions; questions asked from a new session; "
             f"recall scope chosen: {split['scopes']}):",
             f"{'pcm-split':<12} " + " ".join(f"{split['recall'][b]['overall']:7.3f}" for b in budgets),
             f"{'  vs single':<12} " + " ".join(
                 f"{split['recall'][b]['overall'] - single['methods']['pcm'][b]['overall']:+7.3f}" for b in budgets),
             f"{'  precision':<12} " + " ".join(f"{split['precision'][b]['overall']:7.3f}" for b in budgets)]
    return "\n".join(lines)
