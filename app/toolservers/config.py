"""The tool servers the user configured: ``tool_servers.json`` in the data folder.

One entry per server: a stdio command (``command``, ``args``, ``env``, ``cwd``) or a streamable
HTTP ``url`` (optionally with a bearer token read at connect time from the environment variable
``bearer_env``: a token is never written here). A URL that is not this machine is kept only when
the user confirmed it (``off_machine``): tool calls send session text there. Each server has its
own time limit per call (``timeout_s``) and result cap (``result_chars``); ``confirm_each_call``
makes every call of a tool that changes things ask, not only the first per session.

Changed only through ``add_server``, ``remove_server``, ``set_enabled``, ``set_confirm_each_call``
and ``import_servers`` (the JSON other desktop clients use: ``{"mcpServers": {name: {command,
args, env} | {url, type}}}``), which the CLI (``pcm tools``) and Settings → Tools call. Every
refusal is a ``ToolServerError`` with one line.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from app.core.errors import ToolServerError
from app.core.ports import is_loopback

FILE = "tool_servers.json"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")


class ToolServerConfig(BaseModel):
    """One configured tool server (module doc)."""

    name: str
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    bearer_env: str = ""
    off_machine: bool = False
    enabled: bool = True
    timeout_s: float = Field(30.0, gt=0, le=600)
    result_chars: int = Field(20_000, ge=200, le=1_000_000)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError("a server name is letters, digits, - and _ (at most 40, no dots)")
        return value

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"

    def where(self) -> str:
        """The command line or the URL, as shown to the user."""
        if self.url:
            return self.url
        return " ".join([self.command, *self.args])


class ToolServerSettings(BaseModel):
    """The whole file."""

    servers: list[ToolServerConfig] = Field(default_factory=list)
    confirm_each_call: bool = False

    def get(self, name: str) -> ToolServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)


def settings_path(data_dir: Path) -> Path:
    return Path(data_dir) / FILE


def load_servers(data_dir: Path) -> ToolServerSettings:
    """The data folder's tool servers (none when there is no file); a broken file is one line."""
    path = settings_path(data_dir)
    if not path.is_file():
        return ToolServerSettings()
    try:
        return ToolServerSettings.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError) as exc:
        raise ToolServerError(f"{path} cannot be read: {_first_error(exc)}") from None


def save_servers(data_dir: Path, settings: ToolServerSettings) -> None:
    path = settings_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(settings.model_dump(mode="json"), indent=2), encoding="utf-8")
    os.replace(tmp, path)


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where}: {err['msg']}" if where else str(err["msg"])
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def check_server(config: dict[str, Any] | ToolServerConfig, *, allow_off_machine: bool = False) -> ToolServerConfig:
    """A valid server entry, or a ``ToolServerError`` saying what is wrong: a command or a URL
    (not both), an http(s) URL, a URL off this machine only when the user confirmed it."""
    try:
        server = config if isinstance(config, ToolServerConfig) else ToolServerConfig.model_validate(config)
    except ValidationError as exc:
        raise ToolServerError(f"tool server not valid: {_first_error(exc)}") from None
    if bool(server.command) == bool(server.url):
        raise ToolServerError(f"tool server {server.name}: give a command to run or a URL, not both")
    if server.url:
        if not re.match(r"^https?://", server.url):
            raise ToolServerError(f"tool server {server.name}: {server.url} is not an http(s) URL")
        off = not is_loopback(server.url)
        if off and not (allow_off_machine or server.off_machine):
            raise ToolServerError(f"tool server {server.name}: {server.url} is not this machine; tool calls would "
                                  "send your sessions' text there — confirm it (--yes-off-machine)")
        server = server.model_copy(update={"off_machine": off})
    return server


def add_server(data_dir: Path, config: dict[str, Any] | ToolServerConfig, *,
               allow_off_machine: bool = False) -> ToolServerConfig:
    """Add (or replace, by name) one server; return it as saved."""
    server = check_server(config, allow_off_machine=allow_off_machine)
    settings = load_servers(data_dir)
    settings.servers = [s for s in settings.servers if s.name != server.name] + [server]
    save_servers(data_dir, settings)
    return server


def remove_server(data_dir: Path, name: str) -> ToolServerSettings:
    settings = load_servers(data_dir)
    if settings.get(name) is None:
        raise ToolServerError(f"no tool server {name!r} (see pcm tools list)")
    settings.servers = [s for s in settings.servers if s.name != name]
    save_servers(data_dir, settings)
    return settings


def set_enabled(data_dir: Path, name: str, enabled: bool) -> ToolServerConfig:
    settings = load_servers(data_dir)
    server = settings.get(name)
    if server is None:
        raise ToolServerError(f"no tool server {name!r} (see pcm tools list)")
    server.enabled = enabled
    save_servers(data_dir, settings)
    return server


def set_confirm_each_call(data_dir: Path, each_call: bool) -> ToolServerSettings:
    settings = load_servers(data_dir)
    settings.confirm_each_call = each_call
    save_servers(data_dir, settings)
    return settings


def from_client_config(doc: Any) -> list[dict[str, Any]]:
    """The server entries of another desktop client's JSON (``{"mcpServers": {name: {...}}}``, or
    that mapping alone). SSE-only servers are refused with a line (streamable HTTP and stdio are
    supported)."""
    servers = doc.get("mcpServers", doc) if isinstance(doc, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise ToolServerError('no servers found: expected {"mcpServers": {"name": {"command": …} | {"url": …}}}')
    out = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ToolServerError(f"server {name!r}: expected an object")
        kind = str(entry.get("type") or entry.get("transport") or "").lower()
        if kind == "sse":
            raise ToolServerError(f"server {name!r}: SSE servers are not supported; use its streamable HTTP URL")
        row: dict[str, Any] = {"name": re.sub(r"[^A-Za-z0-9_-]", "-", str(name))[:40].strip("-") or "server"}
        for key in ("command", "args", "env", "cwd", "url"):
            if key in entry:
                row[key] = entry[key]
        if entry.get("disabled"):
            row["enabled"] = False
        out.append(row)
    return out


def import_servers(data_dir: Path, doc: Any, *, allow_off_machine: bool = False) -> list[ToolServerConfig]:
    """Add every server of another client's configuration (all or none: one bad entry refuses
    the whole import, naming it); return them as saved."""
    servers = [check_server(row, allow_off_machine=allow_off_machine) for row in from_client_config(doc)]
    settings = load_servers(data_dir)
    names = {s.name for s in servers}
    settings.servers = [s for s in settings.servers if s.name not in names] + servers
    save_servers(data_dir, settings)
    return servers


def read_client_config(path: Path) -> Any:
    """The JSON of another client's configuration file; one line when it cannot be read."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ToolServerError(f"{path} cannot be read: {_first_error(exc)}") from None
