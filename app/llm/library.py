"""The model library: the chat models on this machine and the servers running on it.

* Files: the GGUF files in ``models/`` and in the folders other local apps keep theirs in — LM
  Studio (``~/.lmstudio/models``, ``~/.cache/lm-studio/models``), GPT4All
  (``~/.local/share/nomic.ai/GPT4All``), llama.cpp's download cache (``~/.cache/llama.cpp``) and
  Ollama (``~/.ollama/models``: a blob is listed only when a manifest names it as the model layer
  and it starts with the GGUF magic). They are found read-only and never moved: choosing one
  points the settings at its path. Each row carries what the header says: size, quantisation,
  context length, architecture, parameter count, licence, and the chat-template check (compiled
  and rendered in the bounded worker of ``app.llm.template``).
* Servers: the OpenAI-compatible servers on their usual loopback ports (Ollama 11434, LM Studio
  1234, llama.cpp's server 8080), each asked for its models through the existing provider code
  (``OpenAICompatibleProvider``), after a TCP connect with a short timeout, so a closed port costs
  milliseconds.

Speed (first token, tokens/s) is not measured here: the composition root adds what the store
recorded of each model's answers (``app.store.usage_stats``), so it is known from a model's first
use on.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.core.errors import ModelError
from app.llm.gguf import GGUF_MAGIC, check_templates, validate_gguf
from app.llm.models import LOCAL_SOURCE, ModelEntry
from app.llm.template import DEFAULT_TEMPLATE, GEMMA_ARCHITECTURES, template_sources

# llama.cpp's ``llama_ftype`` (``general.file_type``) → the quantisation's usual name.
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
              18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S",
              25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M",
              32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE"}
SERVER_PORTS: tuple[tuple[str, str, int], ...] = (("Ollama", "ollama", 11434), ("LM Studio", "openai", 1234),
                                                  ("llama.cpp server", "openai", 8080))
_MAX_DEPTH = 6  # folder levels searched below an app's models folder (LM Studio: publisher/repo/file)
_OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"


@dataclass
class LibraryModel:
    """One chat model file found on this machine (``pcm models list --json`` writes these)."""

    name: str  # what Settings take: a manifest name, a file name in models/, or a path
    path: str
    source: str  # "models/" | "LM Studio" | "GPT4All" | "llama.cpp cache" | "Ollama"
    size_bytes: int = 0
    quantisation: str = ""
    context_length: int | None = None
    architecture: str = ""
    parameters: str = ""  # general.size_label, e.g. "135M"
    licence: str = ""
    template: str = ""  # the chat-template check, in words
    problem: str = ""  # why it cannot be used ("" when it can)
    default: bool = False  # the manifest's default chat model
    first_token_ms: float | None = None  # measured on its answers so far (None: not used yet)
    tokens_per_s: float | None = None

    def row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LibraryServer:
    """An OpenAI-compatible server answering on a loopback port, with the models it lists."""

    name: str
    kind: str  # "ollama" | "openai" (the provider kind that talks to it)
    base_url: str
    models: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return asdict(self)


def app_folders(home: Path | None = None) -> list[tuple[str, Path]]:
    """The folders other local apps keep their GGUF files in, as (app, folder)."""
    h = Path.home() if home is None else home
    return [("LM Studio", h / ".lmstudio" / "models"), ("LM Studio", h / ".cache" / "lm-studio" / "models"),
            ("GPT4All", h / ".local" / "share" / "nomic.ai" / "GPT4All"), ("llama.cpp cache", h / ".cache" / "llama.cpp")]


# --------------------------------------------------------------------------- reading one file


def template_check(metadata: dict[str, object], shown: str) -> tuple[str, str]:
    """(the chat-template check in words, a problem or "")."""
    if DEFAULT_TEMPLATE not in template_sources(metadata):
        arch = str(metadata.get("general.architecture", ""))
        return ("none in the file: Gemma's turns" if arch in GEMMA_ARCHITECTURES
                else "none in the file: ChatML"), ""
    try:
        check_templates(metadata, shown)
    except ModelError as err:
        return "refused", str(err)
    return "its own, checked", ""


def describe(path: Path, *, name: str, source: str, check: bool = True) -> LibraryModel:
    """A library row for one GGUF file: what its header says; ``problem`` when it is unusable."""
    row = LibraryModel(name=name, path=str(path), source=source)
    try:
        row.size_bytes = path.stat().st_size
        info = validate_gguf(path)
    except (ModelError, OSError) as err:
        row.problem = str(err) if isinstance(err, ModelError) else f"{path} cannot be read ({err})"
        return row
    meta = info.metadata
    row.architecture = str(meta.get("general.architecture", ""))
    file_type = meta.get("general.file_type")
    row.quantisation = FILE_TYPES.get(file_type, f"type {file_type}") if isinstance(file_type, int) else ""
    ctx = meta.get(f"{row.architecture}.context_length")
    row.context_length = int(ctx) if isinstance(ctx, int) else None
    row.parameters = str(meta.get("general.size_label", ""))
    row.licence = str(meta.get("general.license", ""))
    if check:
        row.template, row.problem = template_check(meta, path.name)
    return row


# --------------------------------------------------------------------------- finding files


def _gguf_files(root: Path) -> list[Path]:
    """The chat-model GGUF files under ``root`` (hidden folders, vision projectors and the later
    parts of split files left out), without following links to folders."""
    found: list[Path] = []
    base_depth = len(root.parts)
    for folder, dirs, files in os.walk(root, followlinks=False):
        if len(Path(folder).parts) - base_depth >= _MAX_DEPTH:
            dirs[:] = []
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            low = name.lower()
            if not low.endswith(".gguf") or low.startswith(".") or "mmproj" in low:
                continue
            if "-of-" in low and "-00001-of-" not in low:
                continue
            found.append(Path(folder) / name)
    return found


def ollama_models(root: Path) -> list[tuple[str, Path]]:
    """(``ollama:name:tag``, blob) for every Ollama manifest whose model layer is a GGUF blob."""
    manifests = root / "manifests"
    out: list[tuple[str, Path]] = []
    if not manifests.is_dir():
        return out
    for path in sorted(p for p in manifests.rglob("*") if p.is_file()):
        try:
            layers = json.loads(path.read_text(encoding="utf-8")).get("layers", [])
        except (OSError, ValueError, AttributeError):
            continue
        digest = next((layer.get("digest", "") for layer in layers if isinstance(layer, dict)
                       and layer.get("mediaType") == _OLLAMA_MODEL_LAYER), "")
        blob = root / "blobs" / str(digest).replace(":", "-")
        if not digest or not blob.is_file():
            continue
        try:
            with blob.open("rb") as fh:
                if fh.read(4) != GGUF_MAGIC:
                    continue
        except OSError:
            continue
        rel = path.relative_to(manifests).parts
        out.append((f"ollama:{rel[-2]}:{rel[-1]}" if len(rel) >= 2 else f"ollama:{rel[-1]}", blob))
    return out


def discover_files(models_dir: Path, manifest: Sequence[ModelEntry], *, home: Path | None = None,
                   check: bool = True) -> list[LibraryModel]:
    """Every chat model file on this machine (module doc): the manifest's chat models and the
    files in ``models_dir`` first, then each app's folder; a file reached twice is listed once."""
    rows: list[LibraryModel] = []
    seen: set[str] = set()

    def add(path: Path, name: str, source: str, default: bool = False) -> None:
        key = os.path.realpath(path)
        if key in seen:
            return
        seen.add(key)
        row = describe(path, name=name, source=source, check=check)
        row.default = default
        rows.append(row)

    from app.llm.models import list_models

    for entry in list_models(models_dir, manifest):
        if entry.role.value == "chat":
            target = entry.target(models_dir)
            if target.exists():
                add(target, entry.name, "models/" if entry.source == LOCAL_SOURCE else "models/ (manifest)",
                    entry.default)
    h = Path.home() if home is None else home
    for app, folder in app_folders(h):
        if folder.is_dir():
            for path in _gguf_files(folder):
                add(path, str(path), app)
    for name, blob in ollama_models(h / ".ollama" / "models"):
        row_count = len(rows)
        add(blob, str(blob), "Ollama")
        if len(rows) > row_count:
            rows[-1].name, rows[-1].path = str(blob), str(blob)
            rows[-1].source = f"Ollama ({name.removeprefix('ollama:')})"
    return rows


# --------------------------------------------------------------------------- servers


def port_open(host: str, port: int, timeout_s: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def probe_servers(ports: Sequence[tuple[str, str, int]] = SERVER_PORTS, *, host: str = "127.0.0.1",
                  timeout_s: float = 0.5) -> list[LibraryServer]:
    """The servers answering on ``ports`` ((name, provider kind, port)) with the models each lists
    (asked through ``OpenAICompatibleProvider``); a closed or silent port is left out."""
    from app.llm.providers.openai_compat import OpenAICompatibleProvider
    from app.llm.providers.settings import ProviderConfig

    found: list[LibraryServer] = []
    for name, kind, port in ports:
        if not port_open(host, port, timeout_s):
            continue
        base_url = f"http://{host}:{port}/v1"
        config = ProviderConfig(id=f"probe-{port}", kind=kind, base_url=base_url, model="?",  # type: ignore[arg-type]
                                timeout_s=max(timeout_s, 1.0))
        try:
            listed = OpenAICompatibleProvider(config).client().with_options(timeout=max(timeout_s, 1.0)).models.list()
            models = sorted(str(m.id) for m in listed)
        except Exception:  # noqa: BLE001 - a port that does not speak the API is no server of ours
            continue
        found.append(LibraryServer(name=name, kind=kind, base_url=base_url, models=models))
    return found
