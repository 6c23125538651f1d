"""The conflicts section of the prompt: facts the user stated differently, never resolved silently.

Keyed statements ("my deadline is Friday", ``compiler.extract_facts``) of the session and of the
input are grouped by key; where values disagree, one is chosen by reliability, then recency,
then confidence, and the conflict is stated as a line bound to every statement's evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from app.core.context.compiler import Conflict, Fact, Item
from app.core.types import BlockType, Priority


def resolve_conflicts(facts: Sequence[Fact]) -> tuple[list[Conflict], set[str]]:
    """Group facts by key; where values disagree pick by reliability, then recency, then
    confidence, and return the conflicts (to be stated in the context) and the losing ids."""
    by_key: dict[str, list[Fact]] = {}
    for fact in facts:
        by_key.setdefault(fact.key, []).append(fact)
    conflicts: list[Conflict] = []
    losers: set[str] = set()
    for key in sorted(by_key):
        group = by_key[key]
        if len({f.value.strip().lower() for f in group}) < 2:
            continue
        ordered = sorted(group, key=lambda f: (-f.reliability, _neg(f.at), -f.confidence, f.evidence_id))
        win = ordered[0]
        runner = ordered[1]
        if win.reliability != runner.reliability:
            rule = "more reliable source"
        elif win.at != runner.at:
            rule = "more recent"
        elif win.confidence != runner.confidence:
            rule = "higher confidence"
        else:
            rule = "undecided: both shown"
        conflicts.append(
            Conflict(
                key=key,
                chosen=win.value,
                chosen_evidence=win.evidence_id,
                others=[{"value": f.value, "evidence_id": f.evidence_id, "at": f.at} for f in ordered[1:]],
                rule=rule,
            )
        )
        losers.update(f.evidence_id for f in ordered[1:] if f.value.strip().lower() != win.value.strip().lower())
    return conflicts, losers


def _neg(at: str) -> tuple[int, ...]:
    """Sort key that puts later ISO timestamps first."""
    return tuple(-ord(c) for c in at)


def conflict_items(conflicts: Sequence[Conflict]) -> list[Item]:
    """State every conflict in the context (never resolved silently)."""
    items = []
    for n, c in enumerate(conflicts):
        others = "; ".join(f"'{o['value']}' [{o['evidence_id']}]" for o in c.others)
        text = f"Conflict on {c.key}: using '{c.chosen}' [{c.chosen_evidence}] ({c.rule}); also stated: {others}"
        items.append(Item(f"conflict:{c.key}", BlockType.STATE, text, Priority.HIGH, score=1.0, order=300 + n,
                          evidence_ids=(c.chosen_evidence, *(o["evidence_id"] for o in c.others))))
    return items


def conflict_lines(facts: Sequence[Fact], *, surface: bool) -> tuple[list[Item], list[Conflict]]:
    """The conflicts among ``facts`` and their lines: must items when the plan surfaces
    conflicts (``surface``), else high."""
    conflicts, _ = resolve_conflicts(facts)
    priority = Priority.MUST if surface else Priority.HIGH
    return [replace(it, priority=priority) for it in conflict_items(conflicts)], conflicts
