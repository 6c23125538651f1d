"""Real parts for the provider tests: the small GGUF (from ``$PCM_MODELS_DIR`` or models/), loaded
in process once per module, and an OpenAI-compatible server started from the same file with
llama-cpp-python's own server (``python -m llama_cpp.server``) on a free loopback port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.config import default_models_dir
from app.llm.models import load_manifest


def gguf_path() -> Path:
    """The default chat model's file, or skip (it is fetched by scripts/setup.sh / pcm models fetch)."""
    models = default_models_dir()
    manifest = models / "manifest.json"
    if not manifest.is_file():
        manifest = Path(__file__).resolve().parents[2] / "models" / "manifest.json"
    entry = next(e for e in load_manifest(manifest) if e.role.value == "chat" and e.default)
    path = entry.target(models)
    if not path.is_file():
        pytest.skip(f"{path} is absent: run `pcm models fetch`")
    return path


@dataclass
class Served:
    """A running ``llama_cpp.server``: its base URL and process."""

    base_url: str
    process: subprocess.Popen[bytes]
    started_s: float

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(model: Path, *, timeout_s: float = 90.0) -> Served:
    """Start the server and wait until it lists its model (raises when it does not come up)."""
    pytest.importorskip("uvicorn", reason="llama-cpp-python's [server] extra is not installed (pip install -e .[dev])")
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", "2", "--verbose", "false"]
    started = time.perf_counter()
    log = tempfile.TemporaryFile()  # not a pipe: a full pipe would stall the server
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}/v1"
    while time.perf_counter() - started < timeout_s:
        if process.poll() is not None:
            log.seek(0)
            err = log.read().decode(errors="replace")[-600:]
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}: {err}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1) as reply:
                json.load(reply)
            return Served(url, process, time.perf_counter() - started)
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"llama_cpp.server did not answer within {timeout_s:.0f} s")


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    server = start_server(gguf_path())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def local_model() -> Iterator[object]:
    from app.llm.llama import LlamaChatModel

    model = LlamaChatModel(gguf_path(), name="SmolLM2-135M-Instruct")
    try:
        yield model
    finally:
        model.close()
