"""The model library as the front ends see it: files, servers, recommended downloads, speeds.

Composition over the adapters (``app.llm.models``' manifest, ``app.llm.library``, ``app.llm.hub``,
``app.store.usage_stats``, ``app.llm.providers.settings``), used by ``pcm models list|download|use``
(``app/cli.py``), the desktop's Models page (through ``app.ui.services.ModelAccess``, filled in by
``app/desktop.py``) and ``app/main.py`` (the manifest it loads the models by).
Every function may block (file headers, template checks, port probes, a download): call them off
the UI thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.config import REPO_ROOT, Settings
from app.core.errors import ModelError
from app.core.ports import CancelToken
from app.llm import hub, library
from app.llm.models import ModelEntry, load_manifest

CATALOG_FILE = "catalog.json"


def manifest_path(settings: Settings) -> Path:
    """The committed model manifest (models/manifest.json), even when models_dir is elsewhere."""
    local = settings.models_dir / "manifest.json"
    return local if local.is_file() else REPO_ROOT / "models" / "manifest.json"


def manifest(settings: Settings) -> list[ModelEntry]:
    return load_manifest(manifest_path(settings))


def catalog_path(settings: Settings) -> Path:
    """The curated list: ``models/catalog.json`` beside the models, else the repository's (bundle's)."""
    local = settings.models_dir / CATALOG_FILE
    return local if local.is_file() else REPO_ROOT / "models" / CATALOG_FILE


def catalog(settings: Settings) -> list[hub.CatalogEntry]:
    return hub.load_catalog(catalog_path(settings))


def _speed_of(speeds: dict[str, Any], *names: str) -> Any:
    return next((speeds[n] for n in names if n in speeds), None)


def listing(settings: Settings, *, servers: bool = True, check: bool = True) -> dict[str, Any]:
    """{"chat_model", "files": [...], "servers": [...], "catalog": [...]} — each file with what its
    header says and its speed measured on its answers so far; each catalog entry with whether it is
    already in ``models/``. ``servers=False`` skips the port probes; ``check=False`` the template
    checks (a quicker refresh)."""
    from app.store.usage_stats import read_model_speeds

    speeds = read_model_speeds(settings.db_path)
    files = library.discover_files(settings.models_dir, manifest(settings), check=check)
    for row in files:
        speed = _speed_of(speeds, row.name, Path(row.path).name.removesuffix(".gguf"))
        if speed is not None:
            row.first_token_ms, row.tokens_per_s = speed.first_token_ms, speed.tokens_per_s
    found = library.probe_servers() if servers else []
    server_rows = []
    for server in found:
        server_row = server.row()
        server_row["speeds"] = {m: speeds[m]._asdict() for m in server.models if m in speeds}
        server_rows.append(server_row)
    entries = [{**e.model_dump(), "present": (settings.models_dir / e.file).is_file()} for e in catalog(settings)]
    return {"chat_model": settings.chat_model, "files": [f.row() for f in files], "servers": server_rows,
            "catalog": entries}


def download(settings: Settings, name: str, *, endpoint: str | None = None,
             on_progress: hub.Progress | None = None, cancel: CancelToken | None = None) -> Path:
    """Download the catalog entry ``name`` into ``models/`` (``hub.download_model``)."""
    entry = next((e for e in catalog(settings) if e.name.lower() == name.strip().lower()), None)
    if entry is None:
        known = ", ".join(e.name for e in catalog(settings))
        raise ModelError(f"no recommended model {name!r}; the list has {known}")
    return hub.download_model(entry, settings.models_dir, endpoint=endpoint, on_progress=on_progress, cancel=cancel)


def note(settings: Settings) -> str:
    """One plain line on the chat model in use when the manifest says what it can and cannot do
    (the bundled default), with how to get a better one; "" for any other model."""
    entry = next((e for e in manifest(settings) if e.name == settings.chat_model and e.note), None)
    return f"{entry.note} — File → Models gets a better one" if entry is not None else ""


def verify_chat_model(settings: Settings, value: str) -> str | None:
    """None when ``value`` names a usable GGUF chat model, else a one-line reason.

    Files in the manifest are checked by header (their hash was verified on fetch); any other
    file is also loaded and decoded in a child process, because llama.cpp aborts the whole
    process on some broken files.
    """
    from app.llm.gguf import probe_gguf, validate_gguf
    from app.llm.models import resolve_chat_model

    entries = manifest(settings)
    try:
        path = resolve_chat_model(value, settings.models_dir, entries)
        if any(e.target(settings.models_dir) == path for e in entries):
            validate_gguf(path)
        else:
            probe_gguf(path)
    except (ModelError, OSError, ValueError) as err:
        return str(err).splitlines()[0] if str(err) else type(err).__name__
    return None


def use_file(settings: Settings, value: str) -> Settings:
    """Make ``value`` (a manifest name, a file in models/ or a path) the default chat model once it
    passed ``verify_chat_model``, and save the settings; the next start (or engine) loads it."""
    problem = verify_chat_model(settings, value)
    if problem is not None:
        raise ModelError(problem)
    chosen = settings.model_copy(update={"chat_model": value})
    chosen.save()
    return chosen


def use_server(settings: Settings, server: dict[str, Any], model: str) -> str:
    """Answer with ``model`` of a listed server (a ``listing()["servers"]`` row) from now on: added
    as a provider and made the default; returns its provider id."""
    from app.llm.providers.settings import add_provider

    kind = str(server["kind"])
    provider_id = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in f"{kind}-{model}")[:40].strip("-.")
    # llama.cpp's servers take JSON output as {"type": "json_object", "schema": ...}
    style = "json_object" if "llama.cpp" in str(server.get("name", "")) else "json_schema"
    saved = add_provider(settings.data_dir, {"id": provider_id, "kind": kind, "base_url": server["base_url"],
                                             "model": model, "name": f"{server.get('name', kind)}: {model}",
                                             "json_schema_style": style}, set_as_default=True)
    return saved.id
