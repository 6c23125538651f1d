"""The plan's required information checked against the compiled context.

Each name the plan requires (``user_profile``, ``current_goal``, ``task_state``, ``branch_history``,
``evidence``, ``env_state``, ``tools``) is met by a line the compiled context kept, or reported
missing; the build records the checks. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from app.core.context.compiler import CompiledContext, Item
from app.core.types import BlockType


class RequiredCheck(BaseModel):
    """One item of the plan's required information and how the compiled context meets it."""

    name: str
    met: bool
    by: str  # what meets it, or why it is missing


def _included(items: Sequence[Item], compiled: CompiledContext) -> list[Item]:
    dropped = {d.item_id for d in compiled.dropped}
    return [it for it in items if it.item_id not in dropped]


def check_required(required: Sequence[str], items: Sequence[Item], compiled: CompiledContext,
                   offered_tools: Sequence[str], notes: Mapping[str, str]) -> list[RequiredCheck]:
    """Each required item of the plan against the compiled context (``offered_tools``: the tools
    the turn's round offered; ``notes``: note id → kind)."""
    kept = _included(items, compiled)
    ids = [it.item_id for it in kept]

    def first(pred: str, found: list[str]) -> RequiredCheck:
        return RequiredCheck(name=pred, met=bool(found), by=found[0] if found else "")

    checks: list[RequiredCheck] = []
    for name in required:
        if name == "user_profile":
            check = first(name, [i for i in ids if i.startswith("profile:")])
        elif name == "current_goal":
            goal = [i for i in ids if i.startswith("plan:") or i.startswith("task:")]
            check = RequiredCheck(name=name, met=True, by=goal[0] if goal else "the input itself")
        elif name == "task_state":
            check = first(name, [i for i in ids if i.startswith(("task:", "running:"))])
        elif name == "branch_history":
            check = first(name, [it.item_id for it in kept if it.segment == BlockType.CONVERSATION])
        elif name == "evidence":
            check = first(name, [it.item_id for it in kept if it.evidence_ids and it.segment in
                                 (BlockType.EVIDENCE, BlockType.MEMORY, BlockType.CONVERSATION)])
        elif name == "env_state":
            check = first(name, [i for i in ids if notes.get(i) == "env"])
        else:  # tools
            check = RequiredCheck(name=name, met=bool(offered_tools), by=", ".join(offered_tools))
        if not check.met:
            check.by = f"missing: no {name.replace('_', ' ')} in the compiled context"
        checks.append(check)
    return checks
