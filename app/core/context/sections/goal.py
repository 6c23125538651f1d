"""The goal section of the prompt: what the input asks for, as the intent read it."""

from __future__ import annotations

from app.core.context.compiler import Item
from app.core.intent.model import Intent
from app.core.text.quoting import quote_label
from app.core.types import BlockType, Priority


def goal_items(intent: Intent, clarification: str | None = None) -> list[Item]:
    """The current goal's lines: acceptance (must), constraints, sub-questions, and the question
    to ask first when the plan needs a clarification (``clarification``)."""
    lines: list[str] = []
    if intent.acceptance:
        lines.append("Done when: " + "; ".join(intent.acceptance))
    if intent.constraints:
        # the user's statements (this input's, the profile's): each folded onto the line
        lines.append("Constraints: " + "; ".join(quote_label(c, 400) for c in intent.constraints))
    if intent.sub_questions and len(intent.sub_questions) > 1:
        lines.append("Sub-questions: " + " | ".join(intent.sub_questions))
    if clarification:
        lines.append("Unclear, ask first: " + clarification)
    # The tool policy is not restated here: tools run in the tool round before the answer,
    # and their results arrive as fenced evidence; the answering model calls none itself.
    return [Item(f"plan:{n}", BlockType.PLAN, line, Priority.MUST if n == 0 else Priority.HIGH, order=n)
            for n, line in enumerate(lines)]
