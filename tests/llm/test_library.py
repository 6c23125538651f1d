"""The model library (``app.llm.library``, ``app.model_library``, ``pcm models list``): GGUF files in
fake folders of the other local apps, found read-only; servers on loopback ports, among them a
real ``llama_cpp.server``."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from app.llm.library import SERVER_PORTS, describe, discover_files, ollama_models, probe_servers
from tests.llm.gguf_util import write_gguf

META = {"general.architecture": "llama", "general.file_type": 15, "llama.context_length": 4096,
        "general.license": "apache-2.0", "general.size_label": "1B"}


def fake_home(home: Path) -> dict[str, Path]:
    """The folders LM Studio, GPT4All, llama.cpp and Ollama keep models in, with small real GGUF files."""
    lms = home / ".lmstudio" / "models" / "publisher" / "Repo-GGUF"
    gpt4all = home / ".local" / "share" / "nomic.ai" / "GPT4All"
    cache = home / ".cache" / "llama.cpp"
    for folder in (lms, gpt4all, cache, lms / ".hidden"):
        folder.mkdir(parents=True)
    files = {
        "lmstudio": write_gguf(lms / "repo-Q4_K_M.gguf", metadata=META),
        "gpt4all": write_gguf(gpt4all / "orca-mini.gguf", metadata={"general.architecture": "gemma3"}),
        "cache": write_gguf(cache / "org_repo_model-00001-of-00002.gguf", metadata=META),
    }
    write_gguf(cache / "org_repo_model-00002-of-00002.gguf", metadata=META)  # a later part: not a model of its own
    write_gguf(lms / "mmproj-repo-f16.gguf", metadata=META)  # a vision projector: not a chat model
    write_gguf(lms / ".hidden" / "secret.gguf", metadata=META)
    (gpt4all / "broken.gguf").write_bytes(b"GGUF\x03\x00")  # truncated: listed with its problem
    ollama = home / ".ollama" / "models"
    (ollama / "blobs").mkdir(parents=True)
    blob = write_gguf(ollama / "blobs" / ("sha256-" + "a" * 64), metadata=META)
    (ollama / "blobs" / ("sha256-" + "b" * 64)).write_bytes(b"not a gguf: a license text")
    manifest = ollama / "manifests" / "registry.ollama.ai" / "library" / "llama3.2" / "1b"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "a" * 64},
        {"mediaType": "application/vnd.ollama.image.license", "digest": "sha256:" + "b" * 64}]}), encoding="utf-8")
    other = manifest.parent.parent / "notgguf" / "latest"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model",
                                             "digest": "sha256:" + "b" * 64}]}), encoding="utf-8")
    files["ollama"] = blob
    return files


def test_discovery_finds_the_other_apps_files_read_only(tmp_path: Path) -> None:
    home, models = tmp_path / "home", tmp_path / "models"
    models.mkdir()
    files = fake_home(home)
    os.symlink(files["lmstudio"], models / "linked.gguf")  # the same file reached twice: listed once
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in home.rglob("*") if p.is_file()}
    rows = {Path(r.path).name: r for r in discover_files(models, [], home=home)}
    assert set(rows) == {"linked.gguf", "orca-mini.gguf", "org_repo_model-00001-of-00002.gguf", "broken.gguf",
                         "sha256-" + "a" * 64}
    linked = rows["linked.gguf"]
    assert (linked.source, linked.quantisation, linked.context_length, linked.licence, linked.parameters) == \
        ("models/", "Q4_K_M", 4096, "apache-2.0", "1B")
    assert linked.template == "none in the file: ChatML" and linked.problem == ""
    assert rows["orca-mini.gguf"].source == "GPT4All"
    assert rows["orca-mini.gguf"].template == "none in the file: Gemma's turns"
    assert rows["org_repo_model-00001-of-00002.gguf"].source == "llama.cpp cache"
    assert "truncated" in rows["broken.gguf"].problem
    assert rows["sha256-" + "a" * 64].source == "Ollama (llama3.2:1b)"
    after = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in home.rglob("*") if p.is_file()}
    assert after == before, "nothing in the other apps' folders was moved or changed"


def test_ollama_blobs_count_only_when_a_manifest_names_a_gguf(tmp_path: Path) -> None:
    fake_home(tmp_path)
    found = ollama_models(tmp_path / ".ollama" / "models")
    assert [name for name, _ in found] == ["ollama:llama3.2:1b"]


def test_a_template_that_does_not_compile_is_reported(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "bad.gguf", metadata={**META, "tokenizer.chat_template": "{% if %}"})
    row = describe(path, name="bad.gguf", source="models/")
    assert row.template == "refused" and "bad.gguf" in row.problem


def test_closed_ports_are_skipped_quickly() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert probe_servers([("nothing", "openai", port)], timeout_s=0.2) == []
    assert [p for _, _, p in SERVER_PORTS] == [11434, 1234, 8080]


@pytest.mark.model
def test_a_running_llama_cpp_server_is_listed_with_its_models() -> None:
    from tests.providers.conftest import gguf_path, start_server

    server = start_server(gguf_path())
    try:
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        found = probe_servers([("llama.cpp server", "openai", port)])
    finally:
        server.stop()
    assert len(found) == 1 and found[0].base_url == server.base_url
    assert found[0].models and found[0].models[0].endswith(".gguf")


def test_pcm_models_list_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    home = tmp_path / "home"
    fake_home(home)
    monkeypatch.setenv("HOME", str(home))
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "models" / "manifest.json", models / "manifest.json")
    monkeypatch.setenv("PCM_MODELS_DIR", str(models))
    assert main(["models", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    sources = {f["source"] for f in listing["files"]}
    assert {"LM Studio", "GPT4All", "llama.cpp cache"} <= sources
    assert listing["catalog"] and all(not c["present"] for c in listing["catalog"])
    assert isinstance(listing["servers"], list)
    assert main(["models", "list"]) == 0
    text = capsys.readouterr().out
    assert "repo-Q4_K_M.gguf" in text and "recommended downloads" in text
