"""Prompt formats for GGUF files without a chat template of their own (``LlamaChatModel``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.ports import ChatMessage


def fold_system(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages with every system message put in front of the first user message (Gemma has
    no system role: its own template does the same)."""
    system = "\n\n".join(m.get("content", "") for m in messages if m.get("role") == "system")
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if system:
        first = next((m for m in rest if m.get("role") == "user"), None)
        if first is None:
            rest.insert(0, {"role": "user", "content": system})
        else:
            first["content"] = f"{system}\n\n{first.get('content', '')}"
    return rest


def format_gemma_turns(fmt: Any) -> Any:
    """llama-cpp-python's Gemma formatter, which drops system messages, over ``fold_system``."""

    def format_gemma(*, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        return fmt.format_gemma(messages=fold_system(messages), **kwargs)

    return format_gemma
