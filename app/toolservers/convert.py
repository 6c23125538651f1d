"""What the MCP SDK hands back, in the engine's terms: a listed tool as a ``ServerTool`` (its
annotations as hints), a call's result as a ``ServerCallResult`` (every content block as text, or
a line standing for what is not text), an exception as one line naming the server."""

from __future__ import annotations

import json
from typing import Any

from app.core.ports import ServerCallResult, ServerResultPart, ServerTool


def listed_tool(server: str, tool: Any) -> ServerTool:
    """``mcp_types.Tool`` → ``ServerTool``. Without annotations a tool counts as one that changes
    things (the protocol's defaults: not read-only, destructive, open world)."""
    hints = tool.annotations
    return ServerTool(
        server=server, name=tool.name, title=tool.title or (hints.title if hints and hints.title else "") or "",
        description=tool.description or "", input_schema=dict(tool.input_schema or {}),
        read_only=bool(hints and hints.read_only_hint),
        destructive=True if hints is None or hints.destructive_hint is None else bool(hints.destructive_hint),
        open_world=True if hints is None or hints.open_world_hint is None else bool(hints.open_world_hint),
    )


def call_result(result: Any) -> ServerCallResult:
    """``mcp_types.CallToolResult`` → ``ServerCallResult``; structured content is kept as JSON
    when the result has no text of its own."""
    parts = [_part(block) for block in result.content]
    if result.structured_content is not None and not any(p.kind == "text" for p in parts):
        parts.append(ServerResultPart(kind="structured", text=json.dumps(result.structured_content, ensure_ascii=False,
                                                                         default=str)))
    return ServerCallResult(parts=parts, is_error=bool(result.is_error))


def _part(block: Any) -> ServerResultPart:
    kind = getattr(block, "type", "")
    if kind == "text":
        return ServerResultPart(kind="text", text=block.text)
    if kind in ("image", "audio"):
        size = len(block.data) * 3 // 4
        return ServerResultPart(kind=kind, text=f"{block.mime_type}, about {size} bytes, not shown", mime=block.mime_type)
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        mime = getattr(res, "mime_type", "") or ""
        if text is not None:
            return ServerResultPart(kind="resource", text=text, uri=str(res.uri), mime=mime)
        return ServerResultPart(kind="link", text=f"binary resource {res.uri} ({mime or 'unknown type'}), not shown",
                                uri=str(res.uri), mime=mime)
    if kind == "resource_link":
        label = block.title or block.name or str(block.uri)
        return ServerResultPart(kind="link", text=f"link: {label} <{block.uri}>", uri=str(block.uri),
                                mime=block.mime_type or "")
    return ServerResultPart(kind="text", text=f"[{kind or 'unknown'} content, not shown]")


def error_line(server: str, exc: BaseException) -> str:
    """One line for a server's failure (an exception group is read for its first cause)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"tool server {server}: {text[:240]}"
