"""What the desktop app needs from the adapters, as plain callables.

``app.ui`` may import only ``app.core`` and ``app.config`` (DESIGN.md §2). Loading models, probing a
GGUF file and reading or writing export files belong to the adapters, so the desktop composition
root (``app/desktop.py``) fills in a ``Services`` and hands it to the window. Tests may pass
their own (e.g. an engine on scripted fakes).

Every callable here may block for seconds: the ui calls them off the UI thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.config import Settings

if TYPE_CHECKING:
    from app.core.engine.facade import Engine

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ProviderAccess:
    """What the Providers tab may do (blocking callables; ``test`` may take seconds)."""

    #: {"providers": [rows as ``pcm providers list --json``], "daily_limit", "monthly_limit"}
    listing: Callable[[Path], dict[str, Any]]
    #: (data_dir, config, set_as_default, allow_off_machine) → the saved provider's row
    add: Callable[[Path, dict[str, Any], bool, bool], Any]
    remove: Callable[[Path, str], Any]
    set_default: Callable[[Path, str], Any]
    #: (data_dir, daily, monthly, clear)
    set_limits: Callable[[Path, float | None, float | None, bool], Any]
    #: one line: reachable? a short reply, its first-token latency and cost
    test: Callable[[Path, str], str]
    #: whether an endpoint URL is this machine (loopback)
    is_loopback: Callable[[str], bool]
    #: (the running engine or None, data_dir): its provider registry follows the file
    apply: Callable[[Any, Path], Any]


@dataclass(frozen=True)
class ModelAccess:
    """What the Models tab may do (blocking callables; run them off the UI thread)."""

    #: (settings, probe servers) → {"files", "servers", "catalog"} as ``pcm models list --json``
    listing: Callable[[Settings, bool], dict[str, Any]]
    #: (settings, catalog name, on_progress(done, total), cancel token) → the verified file's path
    download: Callable[[Settings, str, Callable[[int, int], None], Any], Path]
    #: (settings, a listed server row, model) → the id of the provider made the default
    use_server: Callable[[Settings, dict[str, Any], str], str]
    #: None when the hub can be reached, else the one line saying the machine is offline
    reachable: Callable[[], str | None]
    #: (settings) → one plain line: what the chat model in use can and cannot do, how to get a better one
    note: Callable[[Settings], str]
    #: (the running engine or None, data_dir): its provider registry follows the file
    apply: Callable[[Any, Path], Any]


@dataclass(frozen=True)
class ToolServerAccess:
    """What the Tools tab may do with the data folder's tool servers (``app.toolservers.config``;
    blocking callables, each a ``CoreError`` line when refused)."""

    #: {"servers": [configured servers as ``ToolServerConfig`` dicts, with "where"], "confirm_each_call"}
    listing: Callable[[Path], dict[str, Any]]
    #: (data_dir, config, allow_off_machine) → the saved server
    add: Callable[[Path, dict[str, Any], bool], Any]
    remove: Callable[[Path, str], Any]
    #: (data_dir, name, enabled)
    set_enabled: Callable[[Path, str, bool], Any]
    #: (data_dir, ask at every call)
    set_confirm_each_call: Callable[[Path, bool], Any]
    #: (data_dir, another client's JSON file, allow_off_machine) → the servers added
    import_file: Callable[[Path, Path, bool], list[Any]]
    #: whether a URL is this machine (loopback)
    is_loopback: Callable[[str], bool]


@dataclass(frozen=True)
class Services:
    """Adapter entry points for the window (all blocking; run them on an executor)."""

    #: Load the store, embedder, index and chat model for ``settings``; reports each step.
    build_engine: Callable[[Settings, Progress], "Engine"]
    #: None when the chat model (a manifest name, a file in models/ or a path) can be used,
    #: else a one-line reason. May probe the file in a child process (seconds).
    verify_chat_model: Callable[[Settings, str], str | None]
    #: Chat model choices: manifest names and the GGUF files found in models/.
    chat_models: Callable[[Settings], list[str]]
    #: Embedding model choices.
    embed_models: Callable[[Settings], list[str]]
    #: The JSON value of an exported document file, read and parsed strictly; a ``CoreError``
    #: naming the file, and the JSON path of a bad value (nesting, NaN, huge integer, surrogate).
    read_document: Callable[[Path], Any]
    #: A document as strict JSON text (no NaN or Infinity); a ``CoreError`` naming a bad value.
    document_text: Callable[[dict[str, Any]], str]
    #: The environment sensors configured in ``settings`` feeding ``sink`` (a thread-safe
    #: ``RawChange -> bool``), not started; the list is the session's stored env events, which
    #: feeds (entries already stored) and API sources (last value) resume from. Returns an
    #: object with ``start()``, ``stop(timeout_s)`` and ``status()``.
    build_sensors: Callable[[Settings, Callable[[Any], bool], list[Any]], Any] | None = None
    #: Reads a file change's text for the intake (binary/oversized files: recorded, not read).
    file_preparer: Callable[[Settings], Callable[[Any], Any]] | None = None
    #: Settings → Providers (``app.llm.providers``); None hides the tab.
    providers: ProviderAccess | None = None
    #: Settings → Models (``app.model_library``); None hides the tab.
    models: ModelAccess | None = None
    #: Settings → Tools (``app.toolservers``): the MCP servers whose tools PCM uses; None hides the tab.
    tool_servers: ToolServerAccess | None = None
    #: Serve the engine's sessions to MCP clients over HTTP on 127.0.0.1 at a port until
    #: cancelled (``app.mcp.run.serve_engine``: engine, data folder, port); a ``CoreError`` when
    #: it cannot. None: the app cannot serve MCP.
    serve_mcp: Callable[[Any, Path, int], Coroutine[Any, Any, None]] | None = None
