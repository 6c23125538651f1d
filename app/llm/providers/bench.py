"""``pcm bench providers``: first-token latency through an OpenAI-compatible server vs in process,
on the same GGUF in the same run, and how long a fallback takes when the server is gone.

The server is llama-cpp-python's own (``python -m llama_cpp.server``, the ``[server]`` extra),
started on a free loopback port from the chat model's file. Each run sends the same short prompt
(a different topic each run) to both, alternating which goes first; times are quoted as median
and p95 (DESIGN.md §6), the served one also as a ratio to in-process.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.core.errors import ModelError
from app.core.ports import GenerationParams
from app.llm.bench import _TOPICS, _fmt, _stats
from app.llm.providers.local import LocalProvider
from app.llm.providers.openai_compat import OpenAICompatibleProvider
from app.llm.providers.registry import ProviderRegistry
from app.llm.providers.settings import ProviderConfig, ProviderSettings, local_provider


def start_server(model: Path, *, threads: int = 2, timeout_s: float = 90.0) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``llama_cpp.server`` for ``model`` on a free loopback port; (process, base URL)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    log = tempfile.TemporaryFile()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", str(threads), "--verbose", "false"]
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}/v1"
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if process.poll() is not None:
            log.seek(0)
            tail = " ".join(log.read().decode(errors="replace").split()[-30:])
            raise ModelError(f"llama_cpp.server exited ({tail}); install the dev extra: pip install -e .[dev]")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1) as reply:
                json.load(reply)
            return process, url
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise ModelError(f"llama_cpp.server did not answer within {timeout_s:.0f} s")


def _first_token_ms(provider: Any, i: int, max_tokens: int) -> float:
    messages = [{"role": "user", "content": f"In one sentence, tell me about {_TOPICS[i % len(_TOPICS)]}."}]
    usage = provider.chat(messages, params=GenerationParams(max_tokens=max_tokens, seed=i), stage="bench").usage
    if usage.first_token_latency_ms is None:
        raise ModelError(f"{provider.id} gave no token ({usage.error or usage.status})")
    return float(usage.first_token_latency_ms)


def bench_providers(model_path: Path, local_model: Any, *, runs: int = 5, max_tokens: int = 8,
                    say: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """The report: server start, first-token latency in process and served, fallback times."""
    say("starting llama_cpp.server")
    started = time.perf_counter()
    process, url = start_server(model_path)
    report: dict[str, Any] = {"model": str(model_path.name), "runs": runs, "server_start_s": time.perf_counter() - started}
    local = LocalProvider(local_model)
    config = ProviderConfig(id="served", kind="openai", base_url=url, model="served", json_schema_style="json_object")
    served = OpenAICompatibleProvider(config, counter=local_model.count_tokens)
    try:
        _first_token_ms(served, 0, 2)  # warm both: the client import, the server's first load
        _first_token_ms(local, 0, 2)
        say(f"first token, {runs} runs each")
        times: dict[str, list[float]] = {"in_process": [], "served": []}
        for i in range(runs):
            pair = [("in_process", local), ("served", served)]
            for name, provider in pair if i % 2 == 0 else pair[::-1]:
                times[name].append(_first_token_ms(provider, i, max_tokens))
        report["first_token_ms"] = {name: _stats(values) for name, values in times.items()}
        report["served_over_in_process"] = (report["first_token_ms"]["served"]["median"]
                                            / report["first_token_ms"]["in_process"]["median"])
    finally:
        process.kill()
        process.wait(timeout=10)
    say("fallback with the server gone")
    report["fallback_ms"] = _fallback(local, config, runs, max_tokens)
    return report


def _fallback(local: LocalProvider, config: ProviderConfig, runs: int, max_tokens: int) -> dict[str, Any]:
    """First-token latency through a registry whose first provider is gone: noticed by the
    availability check (an endpoint not used lately), and by a failed call retried twice
    (an endpoint that answered a moment ago; the backoff waits are counted)."""
    out: dict[str, Any] = {}
    for name, check_every_s in (("checked", 0.0), ("retried", 1e9)):
        settings = ProviderSettings(check_every_s=check_every_s, down_for_s=0.0, retries=2, backoff_s=0.25)
        times = []
        for i in range(runs):
            served = OpenAICompatibleProvider(config)
            registry = ProviderRegistry([(served, config), (local, local_provider())], settings)
            registry._entries[0].checked_at = time.monotonic()  # answered a moment ago
            times.append(_first_token_ms(registry, i, max_tokens))
        out[name] = _stats(times)
    return out


def format_report(report: dict[str, Any]) -> str:
    ft, fb = report["first_token_ms"], report["fallback_ms"]
    return "\n".join([
        f"model {report['model']}; llama_cpp.server started in {report['server_start_s']:.1f} s",
        f"first token in process:        {_fmt(ft['in_process'], 'ms')}",
        f"first token via the server:    {_fmt(ft['served'], 'ms')}",
        f"served / in process (medians): {report['served_over_in_process']:.2f}",
        f"fallback, server gone (checked before use): {_fmt(fb['checked'], 'ms')}",
        f"fallback, server gone (failed call, 2 retries with 0.25 s backoff): {_fmt(fb['retried'], 'ms')}",
    ])
