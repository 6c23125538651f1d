"""Settings and paths.

One ``Settings`` object is built at start (``Settings.load``) and passed into constructors; there is
no global getter. The data location is, in order: ``--data-dir``, ``$PCM_DATA_DIR``, the folder
chosen in the desktop Settings (remembered in the user config folder), the platform's user data
folder. Models live in ``models/`` at the repository root (inside the bundle when the app runs
from a PyInstaller bundle: ``app.frozen.app_root``) unless ``$PCM_MODELS_DIR`` says otherwise.
``HF_HUB_OFFLINE=1`` is forced here, before anything can import a hub client.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import BaseModel, Field

from app.frozen import app_root

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

APP_NAME = "pcm-canvas"
REPO_ROOT = app_root()  # the repository root; the bundle's contents folder when frozen
RESOURCES_DIR = REPO_ROOT / "resources"
SETTINGS_FILE = "settings.json"


def default_models_dir() -> Path:
    """``$PCM_MODELS_DIR`` or ``models/`` next to the package (in a bundle: the bundled models)."""
    env = os.environ.get("PCM_MODELS_DIR")
    return Path(env).expanduser() if env else REPO_ROOT / "models"


def location_file() -> Path:
    """Where the desktop app remembers a data folder chosen in Settings (the user config folder)."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "data_location.txt"


def resolve_data_dir(cli_value: str | os.PathLike[str] | None = None) -> Path:
    """The data folder: the CLI value, else ``$PCM_DATA_DIR``, else the folder chosen in the
    desktop Settings, else the user data folder."""
    if cli_value:
        return Path(cli_value).expanduser().resolve()
    env = os.environ.get("PCM_DATA_DIR")
    if env:
        return Path(env).expanduser().resolve()
    chosen = location_file()
    if chosen.is_file():
        text = chosen.read_text(encoding="utf-8").strip()
        if text:
            return Path(text).expanduser().resolve()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def remember_data_dir(path: str | os.PathLike[str]) -> Path:
    """Use ``path`` as the data folder from the next start on (unless --data-dir or $PCM_DATA_DIR)."""
    target = location_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(str(Path(path).expanduser().resolve()) + "\n", encoding="utf-8")
    return target


class FeedSource(BaseModel):
    """An RSS/Atom feed (http(s) URL or local file) polled every ``interval_s`` seconds."""

    url: str
    interval_s: float = Field(300.0, ge=1.0)


class ApiSource(BaseModel):
    """A JSON endpoint polled every ``interval_s``; ``path`` (dotted, e.g. ``data.price``) picks
    the value watched (empty: the whole document). An event only when that value changes."""

    url: str
    interval_s: float = Field(60.0, ge=1.0)
    path: str = ""


DEFAULT_IGNORE = [".git/*", "*/.git/*", "__pycache__/*", "*/__pycache__/*", "*.tmp", "*.swp", "*~", ".#*", "*.part"]


class Settings(BaseModel):
    """Everything the app can be configured with; saved as JSON in the data folder."""

    data_dir: Path
    models_dir: Path = Field(default_factory=default_models_dir)
    chat_model: str = "SmolLM2-135M-Instruct"  # a manifest name or a path to a .gguf file
    embed_model: str = "all-MiniLM-L6-v2"  # a manifest name or a path to a model folder
    context_size: int = 2048
    n_threads: int = 2
    default_budget: int = 1024
    max_concurrent_streams: int = 2
    # "auto": the memory writer also asks the chat model which memories a turn states (a background
    # call that gives way to your inputs; only memories in the turn's own words are kept). "off": rules only.
    memory_model: Literal["off", "auto"] = "off"
    # An env event relevant to a branch nobody works on: "notify" leaves a notice on it, "answer"
    # a short answer by the chat model, "off" nothing (the event's node is on the canvas either way).
    proactive: Literal["off", "notify", "answer"] = "notify"
    # The desktop app serves its sessions to MCP clients over HTTP on 127.0.0.1 at this port
    # (bearer token: `pcm mcp --print-token`); 0 leaves it off.
    mcp_port: int = Field(0, ge=0, le=65535)
    theme: str = "light"
    # Environment sensors (issue 5): watched folders, feeds and JSON endpoints become env events.
    watched_folders: list[Path] = Field(default_factory=list)
    ignore_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_IGNORE))
    max_file_bytes: int = 1_000_000  # larger (or binary) files are recorded, not read
    coalesce_ms: int = 500  # changes of one path within this window become one event
    feeds: list[FeedSource] = Field(default_factory=list)
    apis: list[ApiSource] = Field(default_factory=list)

    @property
    def db_path(self) -> Path:
        return self.data_dir / "pcm.sqlite3"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index.lance"

    @classmethod
    def load(cls, data_dir: str | os.PathLike[str] | None = None) -> "Settings":
        """Settings from the data folder's settings file (if any), with the data folder resolved."""
        root = resolve_data_dir(data_dir)
        values: dict[str, object] = {}
        path = root / SETTINGS_FILE
        if path.is_file():
            values = json.loads(path.read_text(encoding="utf-8"))
        values["data_dir"] = root
        return cls.model_validate(values)

    def save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # The default models folder is not written: it follows the installation (a bundle that is
        # moved or reinstalled elsewhere, a checkout), so a saved path would point at the old one.
        exclude = {"data_dir"} | ({"models_dir"} if self.models_dir == default_models_dir() else set())
        data = self.model_dump(mode="json", exclude=exclude)
        (self.data_dir / SETTINGS_FILE).write_text(json.dumps(data, indent=2), encoding="utf-8")
