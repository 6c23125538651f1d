"""A tool server's tools without a server: the spec and the registry tool made of a listing, the
schema checks, a result cut to its cap, a reported error, the confirmation gate, the file-reader
rule and the argument schema a small model fills."""

from __future__ import annotations

import asyncio
from typing import Any

from app.core.plan.model import ToolPolicy
from app.core.ports import ServerCallResult, ServerResultPart, ServerState, ServerTool
from app.core.tools.governance import ApprovalRequest, ToolGate
from app.core.tools.registry import ToolRegistry
from app.core.tools.schema import primary_arg, schema_problems
from app.core.tools.selection import argument_schema, file_readers, parse_arguments
from app.core.tools.server import server_spec, server_tool

READ = ServerTool(server="fs", name="read_text_file", description="Read the complete contents of a file.",
                  input_schema={"type": "object", "properties": {"path": {"type": "string"}, "head": {"type": "number"}},
                                "required": ["path"]}, read_only=True)
WRITE = ServerTool(server="mem", name="create_entities", description="Create entities in the knowledge graph",
                   input_schema={"type": "object", "required": ["entities"], "properties": {"entities": {
                       "type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                           "name": {"type": "string"}, "observations": {"type": "array", "items": {"type": "string"}},
                           "meta": {"type": "object"}}}}}})


def test_a_listing_becomes_a_spec_named_server_dot_tool() -> None:
    spec = server_spec(READ)
    assert (spec.name, spec.server, spec.own_name, spec.action) == ("fs.read_text_file", "fs", "read_text_file", False)
    assert server_spec(WRITE).action  # without readOnlyHint it changes things
    long = server_spec(READ.model_copy(update={"description": "x " * 500, "title": "Reader"}))
    assert long.description.startswith("Reader. x x") and len(long.description) == 400


def test_schema_checks_and_the_primary_argument() -> None:
    schema = READ.input_schema
    assert schema_problems(schema, {"path": "a.txt"}) == []
    assert schema_problems(schema, {"head": True}) == ["path: required", "head: should be number"]
    assert schema_problems({**schema, "additionalProperties": False}, {"path": "a", "x": 1}) == [
        "x: not an argument of this tool"]
    assert primary_arg(schema) == "path" and primary_arg(WRITE.input_schema) is None
    assert primary_arg({"properties": {"q": {"type": "string"}}}) == "q"


def _registry(result: ServerCallResult, calls: list[Any], cap: int = 200) -> ToolRegistry:
    async def call(server: str, tool: str, args: dict[str, Any], timeout_s: float) -> ServerCallResult:
        calls.append((server, tool, args, timeout_s))
        return result

    registry = ToolRegistry()
    for listed in (READ, WRITE):
        registry.register(server_tool(listed, call, ServerState(name=listed.server, timeout_s=7, result_chars=cap)))
    return registry


def test_a_call_is_checked_run_cut_to_its_cap_and_labelled() -> None:
    calls: list[Any] = []
    result = ServerCallResult(parts=[ServerResultPart(text="line\n" * 100), ServerResultPart(kind="image", text="image/png")])
    registry = _registry(result, calls)
    policy, offered = ToolPolicy(), ["fs.read_text_file", "mem.create_entities"]
    bad = asyncio.run(registry.call("fs.read_text_file", {"head": 2}, policy=policy, offered=offered, session_id="s"))
    assert bad.status == "error" and bad.error == "invalid arguments: path: required" and calls == []
    ok = asyncio.run(registry.call("fs.read_text_file", {"path": "notes/a.md"}, policy=policy, offered=offered,
                                   session_id="s"))
    assert ok.status == "success" and calls == [("fs", "read_text_file", {"path": "notes/a.md"}, 7)]
    assert ok.call.provider.kind == "mcp" and ok.call.provider.name == "fs"
    [evidence] = ok.evidences
    assert evidence.content.startswith("[tool fs.read_text_file]\n<<< notes/a.md\nline")
    assert "only the first 200 of" in evidence.content and evidence.metadata["server"] == "fs"
    assert evidence.metadata["cut"] is True and evidence.metadata["parts"] == ["text", "image"]


def test_a_reported_error_is_a_failed_call_with_the_servers_words() -> None:
    registry = _registry(ServerCallResult(parts=[ServerResultPart(text="ENOENT: no such file")], is_error=True), [])
    out = asyncio.run(registry.call("fs.read_text_file", {"path": "x"}, policy=ToolPolicy(),
                                    offered=["fs.read_text_file"], session_id="s"))
    assert out.status == "error" and out.error == "fs.read_text_file reported an error: ENOENT: no such file"


def test_the_gate_asks_once_per_tool_and_session_or_each_call() -> None:
    registry = _registry(ServerCallResult(parts=[ServerResultPart(text="ok")]), [])
    asked: list[ApprovalRequest] = []
    answers = iter([True, False, True, True])

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return next(answers)

    gate = ToolGate()
    args = {"entities": [{"name": "Anna"}]}

    def call(session: str) -> Any:
        return asyncio.run(registry.call("mem.create_entities", args, policy=ToolPolicy(),
                                         offered=["mem.create_entities", "fs.read_text_file"], session_id=session,
                                         approve=gate.check))

    assert call("s1").status == "forbidden" and asked == []  # nobody to ask: refused, saying how to allow
    assert "--allow-tool mem.create_entities" in call("s1").error
    gate.approver = approver
    assert call("s1").status == "success" and call("s1").status == "success" and len(asked) == 1
    assert call("s2").error == "you did not allow mem.create_entities to run" and len(asked) == 2
    assert asked[0].arguments == args and asked[0].server == "mem"
    gate.per_call = True
    assert call("s1").status == "success" and call("s1").status == "success" and len(asked) == 4
    read = asyncio.run(registry.call("fs.read_text_file", {"path": "a"}, policy=ToolPolicy(),
                                     offered=["fs.read_text_file"], session_id="s3", approve=gate.check))
    assert read.status == "success" and len(asked) == 4  # read-only: never asks

    async def slow(_request: ApprovalRequest) -> bool:
        await asyncio.sleep(5)
        return True

    gate.approver, gate.ask_timeout_s = slow, 0.05
    assert call("s1").error == "mem.create_entities was not confirmed within 0.05 s"


def test_file_readers_and_the_arguments_a_small_model_fills() -> None:
    readers = file_readers([("fs.read_text_file", "fs", "path"), ("read_file", "", "path"),
                            ("fs.write_file", "fs", "path"), ("fs.read_media_file", "fs", "path")])
    assert readers == [("fs.read_text_file", "path"), ("fs.read_media_file", "path")]
    schema = argument_schema(WRITE.input_schema)
    assert schema is not None and schema["required"] == ["entities"]
    item = schema["properties"]["entities"]["items"]
    assert set(item["properties"]) == {"name", "observations"} and item["additionalProperties"] is False
    assert argument_schema({"properties": {"blob": {"type": "object"}}, "required": ["blob"]}) is None
    assert parse_arguments({"entities": [{"name": "Anna"}], "x": 1}, schema) == {"entities": [{"name": "Anna"}]}
    assert parse_arguments({"x": 1}, schema) is None
