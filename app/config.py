"""Settings and paths.

One ``Settings`` object is built at start (``Settings.load``) and passed into constructors; there is
no global getter. The data location is, in order: ``--data-dir``, ``$PCM_DATA_DIR``, the folder
chosen in the desktop Settings (remembered in the user config folder), the platform's user data
folder. Models live in ``models/`` at the repository root (inside the bundle when the app runs
from a PyInstaller bundle: ``app.frozen.app_root``) unless ``$PCM_MODELS_DIR`` says otherwise.
``HF_HUB_OFFLINE=1`` is forced here, before anything can import a hub client.

Where things live (``platformdirs``): the settings of the *home* data folder (the one used when
none is given: chosen in Settings, else the platform's user data folder) and the window layout
are in the user config folder (``~/.config/pcm-canvas`` on Linux); an older ``settings.json`` in
the home data folder is moved there once (``move_settings``: the copy is checked before the old
file is renamed ``settings.json.bak``, with a note saying where the settings went). A data folder
given by ``--data-dir`` or ``$PCM_DATA_DIR`` that is not the home one keeps its own
``settings.json`` (a portable folder, an evaluation's, a test's). The desktop's log file is in
the user log folder (``~/.local/state/pcm-canvas/log``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, Field, ValidationError

from app.core.errors import SettingsError
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


def config_dir() -> Path:
    """The user config folder: the home data folder's settings, the window layout, the data
    folder chosen in Settings."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def log_dir() -> Path:
    """The user log folder (the platform's state folder): the desktop app's rotating log file."""
    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))


def location_file() -> Path:
    """Where the desktop app remembers a data folder chosen in Settings (the user config folder)."""
    return config_dir() / "data_location.txt"


def home_data_dir() -> Path:
    """The data folder used when none is given: the one chosen in the desktop Settings, else the
    platform's user data folder."""
    chosen = location_file()
    if chosen.is_file():
        text = chosen.read_text(encoding="utf-8").strip()
        if text:
            return Path(text).expanduser().resolve()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def resolve_data_dir(cli_value: str | os.PathLike[str] | None = None) -> Path:
    """The data folder: the CLI value, else ``$PCM_DATA_DIR``, else the home data folder."""
    if cli_value:
        return Path(cli_value).expanduser().resolve()
    env = os.environ.get("PCM_DATA_DIR")
    if env:
        return Path(env).expanduser().resolve()
    return home_data_dir()


def settings_file(data_dir: Path) -> Path:
    """Where ``data_dir``'s settings live: the user config folder for the home data folder, the
    folder itself for any other (module doc)."""
    if Path(data_dir).expanduser().resolve() == home_data_dir().expanduser().resolve():
        return config_dir() / SETTINGS_FILE
    return Path(data_dir) / SETTINGS_FILE


def layout_file(data_dir: Path) -> Path:
    """The desktop window's layout (geometry, docks) in the user config folder; moved there once
    from ``window.ini`` in ``data_dir``, where earlier versions kept it."""
    target = config_dir() / "window.ini"
    old = Path(data_dir) / "window.ini"
    if old.is_file() and not target.exists():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(target, old.read_bytes())
            old.unlink()
        except OSError:  # the layout is a convenience: the old one stays where it was
            return old
    return target


def _write_atomically(path: Path, data: bytes) -> None:
    """``data`` into ``path`` by a rename, so a crash leaves the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def read_settings_file(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` ({} when there is no file); ``SettingsError`` naming the file
    and the fault when it cannot be read or is not a JSON object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as err:
        raise SettingsError(f"settings file {path}: cannot be read ({getattr(err, 'strerror', None) or err})") from None
    try:
        values = json.loads(text)
    except json.JSONDecodeError as err:
        raise SettingsError(f"settings file {path}: not valid JSON at line {err.lineno}, column {err.colno}: "
                            f"{err.msg}") from None
    if not isinstance(values, dict):
        raise SettingsError(f"settings file {path}: not a JSON object ({{\"chat_model\": …}})")
    return values


def move_settings(old: Path, new: Path) -> bool:
    """Move the settings file ``old`` (an earlier version's, in the home data folder) to ``new``
    (the config folder) once: the copy is written atomically and read back equal before ``old``
    is renamed ``settings.json.bak`` beside a note naming ``new``. Nothing happens when ``new``
    exists or ``old`` does not; a broken ``old`` stays where it is (``SettingsError``)."""
    if new.exists() or not old.is_file():
        return False
    values = read_settings_file(old)
    data = old.read_bytes()
    _write_atomically(new, data)
    if read_settings_file(new) != values:  # never drop the old file unless the new one says the same
        raise SettingsError(f"settings file {new}: the copy of {old} did not read back the same; {old} is kept")
    old.replace(old.with_name(SETTINGS_FILE + ".bak"))
    note = (f"PCM Canvas keeps the settings of this data folder in {new} since "
            f"{time.strftime('%Y-%m-%d %H:%M')}; settings.json.bak is the file that was here.\n")
    old.with_name("SETTINGS-MOVED.txt").write_text(note, encoding="utf-8")
    return True


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

    @property
    def file(self) -> Path:
        """The settings file these settings are read from and saved to (``settings_file``)."""
        return settings_file(self.data_dir)

    @classmethod
    def load(cls, data_dir: str | os.PathLike[str] | None = None) -> "Settings":
        """Settings from the data folder's settings file (if any), with the data folder resolved.
        A broken file is a ``SettingsError``: one line naming the file and the fault."""
        root = resolve_data_dir(data_dir)
        path = settings_file(root)
        if path != root / SETTINGS_FILE:
            move_settings(root / SETTINGS_FILE, path)
        values = read_settings_file(path)
        values["data_dir"] = root
        try:
            return cls.model_validate(values)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(the whole file)"
            raise SettingsError(f"settings file {path}: {where}: {first['msg']}"
                                + (f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else "")) from None

    def save(self) -> None:
        """Write the settings to their file (``file``), atomically."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # The default models folder is not written: it follows the installation (a bundle that is
        # moved or reinstalled elsewhere, a checkout), so a saved path would point at the old one.
        exclude = {"data_dir"} | ({"models_dir"} if self.models_dir == default_models_dir() else set())
        data = self.model_dump(mode="json", exclude=exclude)
        _write_atomically(self.file, json.dumps(data, indent=2).encode("utf-8"))
