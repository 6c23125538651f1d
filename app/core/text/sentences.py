"""The split of a compound question into its sub-questions. Pure and deterministic."""

from __future__ import annotations

import re

_SUBQ_SPLIT_RE = re.compile(r",?\s+(?:and|also|plus)\s+(?=(?:what|who|when|where|why|which|how|is|are|does|do|"
                            r"did|can|could|should|will)\b)", re.IGNORECASE)


def split_sub_questions(text: str) -> list[str]:
    """Split a compound question into atomic sub-questions (empty when it is not compound)."""
    sentences = [s.strip() for s in re.findall(r"[^?]+\?", text) if s.strip()]
    if len(sentences) >= 2:
        return [re.sub(r"^[\s.,;!]+", "", s) for s in sentences]
    parts = [p.strip() for p in _SUBQ_SPLIT_RE.split(text.strip()) if p.strip()]
    if len(parts) >= 2 and "?" in text:
        return [p if p.endswith("?") else p.rstrip(".,;") + "?" for p in parts]
    return []
