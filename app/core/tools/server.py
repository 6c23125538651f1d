"""Tools that tool servers (MCP servers) list, as registry tools.

``server_tool`` turns one listed ``ServerTool`` into a ``Tool`` named ``server.tool``: its spec
(description, ``action`` unless the server says it is read-only), its input JSON schema (the
registry checks required and typed arguments before a call; the server checks the rest), the
argument a one-string model choice fills, and a ``run`` that calls the server through the
``ToolServers`` port with the server's time limit and cuts the result to its cap. A result the
server marks as an error is a failed call; a crashed or hung server is a ``ToolServerError``
line. The text of a result becomes evidence like any tool's (fenced by the registry). Pure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from app.core.errors import CoreError
from app.core.plan.tools import ToolSpec
from app.core.ports import ServerCallResult, ServerState, ServerTool
from app.core.text.quoting import quote_label
from app.core.tools.model import ToolResultItem
from app.core.tools.registry import Tool, ToolContext
from app.core.tools.schema import primary_arg

DESCRIPTION_CHARS = 400  # of a server's tool description kept in the spec (the filter's text, the model's list)

#: (server, tool, arguments, timeout_s) → the result; the ``ToolServers`` port's ``call_tool``.
ServerCall = Callable[[str, str, dict[str, Any], float], Awaitable[ServerCallResult]]


class ServerArgs(BaseModel):
    """A server tool's arguments as given: any JSON object (its schema is checked separately)."""

    model_config = ConfigDict(extra="allow")


class ToolReportedError(CoreError):
    """The server ran the tool and it reported a failure (``isError``); the text says what."""


def server_spec(listed: ServerTool) -> ToolSpec:
    """The spec the plan's filter and the model see: ``server.tool``, its title and description."""
    text = " ".join(listed.description.split())
    if listed.title and listed.title.lower() not in text.lower():
        text = f"{listed.title}. {text}" if text else listed.title
    if len(text) > DESCRIPTION_CHARS:
        text = text[:DESCRIPTION_CHARS - 1].rstrip() + "…"
    return ToolSpec(name=f"{listed.server}.{listed.name}", description=text, action=not listed.read_only,
                    server=listed.server)


def result_items(listed: ServerTool, result: ServerCallResult, args: Mapping[str, Any],
                 max_chars: int) -> list[ToolResultItem]:
    """One evidence item of a result: its parts' text in order (what is not text said in a
    line), cut to ``max_chars`` and said so; labelled by the primary argument's value."""
    chunks = [part.text if part.kind in ("text", "resource", "structured") else f"[{part.kind}: {part.text}]"
              for part in result.parts]
    text = "\n".join(c for c in chunks if c)
    cut = len(text) > max_chars
    if cut:
        text = text[:max_chars] + f"\n[… only the first {max_chars} of {len(text)} characters of the result were kept]"
    key = primary_arg(listed.input_schema)
    label = str(args.get(key, "")) if key else ""
    uri = next((p.uri for p in result.parts if p.uri), "")
    return [ToolResultItem(label=quote_label(label or listed.name, 80), content=text or "(an empty result)", uri=uri,
                           metadata={"server": listed.server, "server_tool": listed.name, "cut": cut,
                                     "parts": [p.kind for p in result.parts]})]


def server_tool(listed: ServerTool, call: ServerCall, state: ServerState) -> Tool:
    """The registry tool of ``listed``, calling its server through ``call`` within the server's
    time limit (``state.timeout_s``) and result cap (``state.result_chars``)."""

    async def run(args: ServerArgs, _ctx: ToolContext) -> list[ToolResultItem]:
        given = args.model_dump()
        result = await call(listed.server, listed.name, given, state.timeout_s)
        if result.is_error:
            text = " ".join(" ".join(p.text for p in result.parts).split()) or "no reason given"
            raise ToolReportedError(f"{listed.server}.{listed.name} reported an error: {text[:300]}")
        return result_items(listed, result, given, state.result_chars)

    # The registry's own limit is a little longer: the port ends the call first, with its own line.
    return Tool(server_spec(listed), ServerArgs, run, provider=listed.server, timeout_s=state.timeout_s + 1.0,
                primary_arg=primary_arg(listed.input_schema), input_schema=dict(listed.input_schema))
