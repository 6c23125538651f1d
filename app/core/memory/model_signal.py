"""The local model as an optional extraction signal (schema-constrained JSON), read safely.

``memory_messages`` asks the chat model for the memories one user turn states, as JSON matching
``MEMORY_JSON_SCHEMA``; ``read_model_memories`` turns whatever comes back into memory objects and
keeps only those grounded in the turn: most of a memory's content words must be the turn's own
words (a small model that invents is ignored, never stated to the model as known). Model memories
stay in their session (never the workspace profile: a prohibition or permission comes from the
rules only), carry ``extractor="model"`` and the tag ``model``, and their ids derive from
(evidence, type, content) like the rules' ones, so reading the same recorded output twice writes
nothing new. Pure and deterministic; nothing here raises.
"""

from __future__ import annotations

import json
from typing import Any

from app.core.memory.extract import IMPORTANCE, entities, memory_id
from app.core.text.words import content_stems
from app.core.types import MemoryFragment, MemoryType

MODEL_TYPES: tuple[MemoryType, ...] = ("fact", "decision", "commitment", "event", "preference")
GROUNDED = 0.6  # share of a memory's content words that must occur in the turn
MAX_MEMORIES = 5
MEMORY_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "memories": {
            "type": "array", "maxItems": MAX_MEMORIES,
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": list(MODEL_TYPES)},
                    "content": {"type": "string"},
                    "key": {"type": "string"},
                    "value": {"type": "string"},
                },
                "required": ["type", "content"],
            },
        },
    },
    "required": ["memories"],
}
_SYSTEM = ("List what the user's message states that is worth remembering later: facts about the user "
           "or their work (with key and value), decisions, commitments, dated events, preferences. "
           "Use the message's own words. Answer with JSON only; an empty list when there is nothing.")


def memory_messages(text: str) -> list[dict[str, str]]:
    """The chat prompt asking for the memories of one user turn."""
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": text}]


def _grounded(content: str, turn: set[str]) -> bool:
    words = content_stems(content)
    return bool(words) and sum(w in turn for w in words) >= GROUNDED * len(words)


def read_model_memories(output: str | None, text: str, *, evidence_id: str, at: str
                        ) -> tuple[list[MemoryFragment], list[str]]:
    """The grounded memories of the model's ``output`` for the turn ``text``, and the problems
    found (invalid JSON, an unknown type, an ungrounded content: each one dropped)."""
    if not output:
        return [], []
    try:
        items = json.loads(output).get("memories", [])
    except (ValueError, AttributeError):
        return [], ["not JSON"]
    turn = set(content_stems(text))
    found: list[MemoryFragment] = []
    problems: list[str] = []
    for item in items if isinstance(items, list) else []:
        kind = item.get("type") if isinstance(item, dict) else None
        content = " ".join(str(item.get("content", "")).split())[:200] if isinstance(item, dict) else ""
        if kind not in MODEL_TYPES or not content:
            problems.append(f"dropped: {str(item)[:60]}")
            continue
        if not _grounded(content, turn):
            problems.append(f"not in the turn: {content[:60]}")
            continue
        key = " ".join(str(item.get("key", "")).lower().split())[:40] if kind == "fact" else ""
        value = str(item.get("value", "")).strip()[:80] if key else ""
        ents = entities(content)
        found.append(MemoryFragment(
            fragment_id=memory_id(evidence_id, kind, content), content=content, type=kind,
            context=f"{kind} the local model read in a user turn", keywords=content_stems(content)[:12],
            entities=ents, tags=sorted({kind, "model", *(e.lower() for e in ents[:3])}),
            importance=round(IMPORTANCE[kind] - 0.1, 2), source_evidence_ids=[evidence_id], scope="session",
            key=key if value else "", value=value, valid_from=at, recorded_at=at, extractor="model"))
    return found, problems
