"""The profile section of the prompt: the user's stated prohibitions, permissions and preferences."""

from __future__ import annotations

from app.core.context.compiler import Item
from app.core.intent.profile import UserProfile
from app.core.text.quoting import quote_label
from app.core.types import BlockType, Priority

STATEMENT_CHARS = 400  # a statement longer than this is cut (a profile line is one line)


def profile_items(profile: UserProfile) -> list[Item]:
    """The user's stated prohibitions (must), permissions and preferences, as state lines, each
    bound to the message it was said in (one of another session is labelled with its title).
    Each line is one line: a statement and a title are folded and their markers neutralised
    (``quote_label``), whatever they hold."""
    items: list[Item] = []
    for base, label, priority, statements in ((0, "Never", Priority.MUST, profile.prohibitions),
                                              (100, "Allowed", Priority.HIGH, profile.permissions),
                                              (200, "Prefers", Priority.HIGH, profile.preferences)):
        kind = {0: "prohibition", 100: "permission", 200: "preference"}[base]
        for n, text in enumerate(statements):
            ids, where = profile.origin(text)
            line = f"{label}: {quote_label(text, STATEMENT_CHARS)}"
            line += f" (said in session \u201c{quote_label(where, 80)}\u201d)" if where else ""
            items.append(Item(f"profile:{kind}:{n}", BlockType.STATE, line, priority, order=base + n,
                              evidence_ids=ids))
    return items
