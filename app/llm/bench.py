"""``pcm bench models``: load times, first-token latency, tokens/s and embedder throughput.

``bench_models`` returns a plain dict (JSON-serialisable) and ``format_report`` renders it. Every
timing is repeated and quoted as median and p95; a fixed pure-numpy workload is timed in the same
run as a bare baseline, so figures from these shared, noisy machines can be compared as ratios
(DESIGN.md §6).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from app.core.ports import GenerationParams

Stats = dict[str, float]

_TOPICS = ("a lighthouse keeper", "a lost robot", "a mountain village", "an old library",
           "a river journey", "a desert market", "a night train", "a winter garden")
_WORDS = ("context budget evidence branch anchor recall token model graph canvas note task memory "
          "file change feed update answer question plan turn session summary vector index").split()


def _stats(values: list[float], *, higher_is_better: bool = False) -> Stats:
    """Median, p95, min, max and count of ``values``.

    p95 is the slow tail: the 95th percentile for times, the 5th percentile for rates
    (``higher_is_better``), i.e. the rate at the p95 time. Linear interpolation between samples.
    """
    if not values:
        return {"median": float("nan"), "p95": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    arr = np.asarray(values, dtype=float)
    return {
        "median": float(statistics.median(values)),
        "p95": float(np.percentile(arr, 5 if higher_is_better else 95)),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "n": len(values),
    }


def _baseline_ms(runs: int) -> Stats:
    """A fixed CPU workload (256×256 float32 matmuls) as the bare reference for this machine."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256), dtype=np.float32)
    times = []
    for _ in range(max(3, runs)):
        t = time.perf_counter()
        b = a
        for _ in range(20):
            b = np.tanh(a @ b)
        times.append((time.perf_counter() - t) * 1000)
    return _stats(times)


def _sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` deterministic sentences of 12–24 words."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS, size=int(rng.integers(12, 25)))).capitalize() + "."
            for _ in range(n)]


def bench_chat(
    chat_path: str | os.PathLike[str],
    *,
    runs: int = 5,
    max_tokens: int = 128,
    n_threads: int = 2,
    context_size: int = 2048,
    say: Callable[[str], None] = lambda _msg: None,
) -> dict[str, Any]:
    """Time loading ``chat_path`` and ``runs`` streamed generations (after one warm-up)."""
    from app.llm.llama import LlamaChatModel, _import_llama_cpp

    t = time.perf_counter()
    llama_cpp = _import_llama_cpp()
    import_s = time.perf_counter() - t
    loads: list[float] = []
    model = None
    for _ in range(max(1, min(runs, 3))):
        if model is not None:
            model.close()
        t = time.perf_counter()
        model = LlamaChatModel(chat_path, context_size=context_size, n_threads=n_threads)
        loads.append(time.perf_counter() - t)
    assert model is not None
    say(f"chat model loaded in {loads[0]:.2f} s; generating")
    first_ms: list[float] = []
    decode_tps: list[float] = []
    overall_tps: list[float] = []
    completion: list[float] = []
    prompt_tokens = 0
    for i in range(runs + 1):
        topic = _TOPICS[i % len(_TOPICS)]
        messages = [{"role": "user", "content": f"Story {i}: write a long, detailed story about {topic}."}]
        result = model.chat(messages, params=GenerationParams(max_tokens=max_tokens, seed=i), stage="bench")
        if i == 0:
            continue  # warm-up: first decode pays one-off allocation costs
        usage = result.usage
        prompt_tokens = usage.prompt_tokens
        n = usage.completion_tokens
        first = usage.first_token_latency_ms or usage.latency_ms
        first_ms.append(first)
        completion.append(float(n))
        overall_tps.append(n / (usage.latency_ms / 1000) if usage.latency_ms else 0.0)
        decode_s = (usage.latency_ms - first) / 1000
        if n > 1 and decode_s > 0:
            decode_tps.append((n - 1) / decode_s)
    # A long, budget-sized prompt: evaluated from scratch, then with its prefix cached.
    context = " ".join(_sentences(60, seed=3))
    long_first: list[float] = []
    eval_rate: list[float] = []
    cached_first: list[float] = []
    long_tokens = 0
    say("timing a long prompt")
    for i in range(max(1, min(runs, 3))):
        messages = [{"role": "system", "content": f"Context:\n{context}"},
                    {"role": "user", "content": f"Question {i}: what is blocking the release?"}]
        model.prompt_cache = False
        usage = model.chat(messages, params=GenerationParams(max_tokens=2, seed=i), stage="bench").usage
        long_tokens = usage.prompt_tokens
        first = usage.first_token_latency_ms or usage.latency_ms
        long_first.append(first)
        eval_rate.append(usage.prompt_tokens / (first / 1000))
        model.prompt_cache = True
        messages[1]["content"] = f"Question {i}: who reported it first?"
        usage = model.chat(messages, params=GenerationParams(max_tokens=2, seed=i), stage="bench").usage
        cached_first.append(usage.first_token_latency_ms or usage.latency_ms)
    model.close()
    return {
        "model": Path(chat_path).name,
        "llama_cpp_version": getattr(llama_cpp, "__version__", "?"),
        "n_threads": n_threads,
        "context_size": context_size,
        "max_tokens": max_tokens,
        "prompt_tokens": prompt_tokens,
        "import_s": import_s,
        "load_s": _stats(loads),
        "first_token_ms": _stats(first_ms),
        "decode_tokens_per_s": _stats(decode_tps, higher_is_better=True),
        "tokens_per_s": _stats(overall_tps, higher_is_better=True),
        "completion_tokens": _stats(completion),
        "long_prompt_tokens": long_tokens,
        "long_first_token_ms": _stats(long_first),
        "prompt_eval_tokens_per_s": _stats(eval_rate, higher_is_better=True),
        "cached_prefix_first_token_ms": _stats(cached_first),
    }


def bench_embedder(
    embed_dir: str | os.PathLike[str],
    *,
    runs: int = 5,
    batch1_texts: int = 32,
    batch64_texts: int = 256,
    say: Callable[[str], None] = lambda _msg: None,
) -> dict[str, Any]:
    """Time loading ``embed_dir`` and embedding at batch 1 and batch 64 (after one warm-up each);
    ``import_s`` is the import of what that folder runs on (torch for a plain BERT folder,
    sentence-transformers for any other)."""
    from app.llm.bert import bert_layout
    from app.llm.embedder import SentenceEmbedder, _offline_sentence_transformers

    t = time.perf_counter()
    if bert_layout(embed_dir) is not None:
        import torch  # noqa: F401 - timed: what the BERT path imports
    else:
        _offline_sentence_transformers()
    import_s = time.perf_counter() - t
    loads: list[float] = []
    embedder = None
    for _ in range(max(1, min(runs, 3))):
        t = time.perf_counter()
        embedder = SentenceEmbedder(embed_dir)
        loads.append(time.perf_counter() - t)
    assert embedder is not None
    say(f"embedder loaded in {loads[0]:.2f} s; embedding")
    texts1 = _sentences(batch1_texts, seed=1)
    texts64 = _sentences(batch64_texts, seed=2)
    embedder.embed(texts1[:4], batch_size=1)
    embedder.embed(texts64[:64], batch_size=64)
    rate1: list[float] = []
    rate64: list[float] = []
    for _ in range(runs):
        t = time.perf_counter()
        for text in texts1:
            embedder.embed([text], batch_size=1)
        rate1.append(len(texts1) / (time.perf_counter() - t))
        t = time.perf_counter()
        embedder.embed(texts64, batch_size=64)
        rate64.append(len(texts64) / (time.perf_counter() - t))
    import torch

    return {
        "model": Path(embed_dir).name,
        "dim": embedder.dim,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "backend": embedder.backend,
        "import_s": import_s,
        "load_s": _stats(loads),
        "batch1_texts_per_s": _stats(rate1, higher_is_better=True),
        "batch64_texts_per_s": _stats(rate64, higher_is_better=True),
        "batch1_texts": len(texts1),
        "batch64_texts": len(texts64),
    }


def bench_models(
    chat_path: str | os.PathLike[str] | None,
    embed_dir: str | os.PathLike[str] | None,
    *,
    runs: int = 5,
    max_tokens: int = 128,
    n_threads: int = 2,
    on_progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Benchmark the chat model and the embedder (either may be ``None`` to skip it).

    Returns ``{"machine", "baseline_ms", "chat", "embed"}``: load times (s), first-token latency
    (ms), decode and overall tokens/s, a long prompt's first-token latency from scratch (prompt eval
    tokens/s) and with its prefix cached, embedder texts/s at batch 1 and batch 64 — each as
    ``{"median", "p95", "min", "max", "n"}``. Raises ``ModelError`` when a model cannot load.
    """
    say = on_progress or (lambda _msg: None)
    report: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
        },
        "runs": runs,
    }
    say("timing the numpy baseline")
    report["baseline_ms"] = _baseline_ms(runs)
    if chat_path is not None:
        say("benchmarking the chat model")
        report["chat"] = bench_chat(chat_path, runs=runs, max_tokens=max_tokens, n_threads=n_threads, say=say)
    if embed_dir is not None:
        say("benchmarking the embedder")
        report["embed"] = bench_embedder(embed_dir, runs=runs, say=say)
    report["baseline_after_ms"] = _baseline_ms(runs)  # the machine's load may change meanwhile
    return report


def _fmt(stats: Stats, unit: str, digits: int = 1) -> str:
    return f"{stats['median']:.{digits}f} {unit} (p95 slow tail {stats['p95']:.{digits}f}, n={stats['n']})"


def format_report(report: dict[str, Any]) -> str:
    """Render a ``bench_models`` result as a short plain-text report."""
    m = report.get("machine", {})
    lines = [
        f"models benchmark — {m.get('platform', '?')}, Python {m.get('python', '?')}, "
        f"{m.get('cpu_count', '?')} CPUs, {report.get('runs', '?')} runs",
        f"baseline (numpy matmuls): {_fmt(report['baseline_ms'], 'ms')} before, "
        f"{_fmt(report.get('baseline_after_ms', report['baseline_ms']), 'ms')} after",
    ]
    chat = report.get("chat")
    if chat:
        lines += [
            f"chat  {chat['model']} (llama.cpp {chat['llama_cpp_version']}, {chat['n_threads']} threads, "
            f"n_ctx {chat['context_size']}, prompt {chat['prompt_tokens']} tok, max {chat['max_tokens']} tok)",
            f"  import llama_cpp     {chat['import_s']:.2f} s",
            f"  load                 {_fmt(chat['load_s'], 's', 2)}",
            f"  first token          {_fmt(chat['first_token_ms'], 'ms')}",
            f"  decode               {_fmt(chat['decode_tokens_per_s'], 'tok/s')}",
            f"  overall              {_fmt(chat['tokens_per_s'], 'tok/s')}",
            f"  completion length    {_fmt(chat['completion_tokens'], 'tok', 0)}",
            f"  long prompt ({chat['long_prompt_tokens']} tok), first token, no cache "
            f"{_fmt(chat['long_first_token_ms'], 'ms', 0)}",
            f"  prompt eval          {_fmt(chat['prompt_eval_tokens_per_s'], 'tok/s')}",
            f"  same prefix cached   {_fmt(chat['cached_prefix_first_token_ms'], 'ms')}",
        ]
    emb = report.get("embed")
    if emb:
        lines += [
            f"embed {emb['model']} (dim {emb['dim']}, torch {emb['torch_version']}, "
            f"{emb['torch_threads']} threads)",
            f"  import               {emb['import_s']:.2f} s",
            f"  load                 {_fmt(emb['load_s'], 's', 2)}",
            f"  batch 1              {_fmt(emb['batch1_texts_per_s'], 'texts/s')}",
            f"  batch 64             {_fmt(emb['batch64_texts_per_s'], 'texts/s')}",
        ]
    return "\n".join(lines)
