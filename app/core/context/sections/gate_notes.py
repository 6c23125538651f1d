"""The gate's notes in the prompt: what the relevance gate found missing, said as evidence lines.

"Insufficient evidence" when nothing stored passed for the question (and no conversation or tool
result stands for it), and one line per sub-question nothing covers.
"""

from __future__ import annotations

from app.core.context.compiler import Item
from app.core.context.recall_model import RecallResult
from app.core.types import BlockType, Priority

#: The line the context carries when nothing stored passed the relevance gate.
INSUFFICIENT = ("Evidence: nothing stored passed the relevance check for this question — the evidence "
                "is insufficient; say so instead of guessing.")


def gate_items(recalled: RecallResult, *, has_other_evidence: bool) -> list[Item]:
    """The gate's notes: "insufficient evidence" when nothing passed for the question (and no
    conversation or tool result stands for it), and one line per sub-question nothing covers."""
    gate = recalled.gate
    if gate is None:
        return []
    items: list[Item] = []
    if gate.insufficient and not has_other_evidence:
        items.append(Item("gate:insufficient", BlockType.EVIDENCE, INSUFFICIENT, Priority.MUST, order=-1))
    for n, question in enumerate(gate.uncovered):
        items.append(Item(f"gate:uncovered:{n}", BlockType.EVIDENCE,
                          f"Evidence: nothing stored covers the sub-question \"{question}\" (insufficient).",
                          Priority.HIGH, order=-1))
    return items
