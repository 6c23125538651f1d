"""Hostile GGUF files: each ends as one line naming the file and the real reason — in the loader,
in ``pcm models verify --probe``, in ``pcm ask`` and in the desktop self-test — never a hang or a
traceback.

The files are generated: small synthetic GGUFs carrying a hostile chat template or header (they
are refused before llama.cpp sees them), and rewrites of the real SmolLM2 file (garbage weights; a
template that loops only on some inputs) for what needs real tensors.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.core.errors import ModelError
from app.core.ports import GenerationParams
from app.llm.gguf import probe_gguf
from app.llm.template import DEFAULT_TEMPLATE, SAMPLE_MESSAGES
from tests.llm.conftest import MODELS_DIR
from tests.llm.gguf_util import nested_array, rewrite_gguf, write_gguf

ROOT = Path(__file__).resolve().parents[2]
LOOP = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
LOOP_ON_LONG_INPUT = (
    "{% for m in messages %}{% if m.role == 'user' and m.content|length > 30 %}"
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}"
    "{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}{{ '<|im_start|>assistant\\n' }}"
)

# file name -> what its one line must say
SYNTHETIC: dict[str, str] = {
    "loop.gguf": "did not finish within 2 s",
    "recursion.gguf": "recursed without end",
    "sandbox.gguf": "was refused by the Jinja sandbox",
    "syntax.gguf": "has a syntax error (line 1: unexpected '}')",
    "nested.gguf": "key 'pcm.nested' holds arrays nested more than 16 deep",
    "linkloop.gguf": "is a symbolic link loop",
}


def make_synthetic(folder: Path) -> dict[str, Path]:
    """The small hostile files of ``SYNTHETIC`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    templates = {
        "loop.gguf": LOOP,
        "recursion.gguf": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "sandbox.gguf": "{{ ''.__class__.__mro__[1].__subclasses__() }}{% for m in messages %}{{ m.content }}{% endfor %}",
        "syntax.gguf": "{% for m in messages %}{{ m.content }",
    }
    paths = {name: write_gguf(folder / name, metadata={DEFAULT_TEMPLATE: source}) for name, source in templates.items()}
    paths["nested.gguf"] = write_gguf(folder / "nested.gguf", metadata={"pcm.nested": nested_array(20_000)})
    link = folder / "linkloop.gguf"
    (folder / "linkloop2.gguf").symlink_to(link)
    link.symlink_to(folder / "linkloop2.gguf")
    paths["linkloop.gguf"] = link
    return paths


def _env(models_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PCM_MODELS_DIR": str(models_dir), "QT_QPA_PLATFORM": "offscreen"}


def _run(args: list[str], models_dir: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=_env(models_dir), capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL)
    proc.seconds = time.perf_counter() - started  # type: ignore[attr-defined]
    return proc


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_synthetic(tmp_path_factory.mktemp("hostile"))


# --------------------------------------------------------------------------- fast: no llama.cpp needed


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_the_loader_refuses_each_hostile_file_in_one_line(synthetic: dict[str, Path], name: str) -> None:
    from app.llm.llama import LlamaChatModel

    started = time.perf_counter()
    with pytest.raises(ModelError) as info:
        LlamaChatModel(synthetic[name], probe=True)
    message = str(info.value)
    assert name in message and SYNTHETIC[name] in message, message
    assert "\n" not in message and info.value.__cause__ is None
    assert time.perf_counter() - started < 10


def test_models_verify_probe_reports_each_hostile_file(tmp_path: Path) -> None:
    make_synthetic(tmp_path / "models")
    proc = _run(["-m", "app.cli", "--data-dir", str(tmp_path / "data"), "models", "verify", "--probe"], tmp_path / "models")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in proc.stdout.splitlines()}
    for name, reason in SYNTHETIC.items():
        status, detail = rows[name]
        assert status == "invalid" and name in detail and reason in detail, rows[name]
    assert rows["linkloop2.gguf"][0] == "invalid"
    assert proc.seconds < 60  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- on the real model


@pytest.fixture(scope="module")
def real_hostile(tmp_path_factory: pytest.TempPathFactory, chat_model_path: Path) -> dict[str, Path]:
    """Rewrites of the real SmolLM2 file: garbage weights, and a template that loops only on a
    user message longer than 30 characters (it passes the load-time check)."""
    folder = tmp_path_factory.mktemp("real-hostile")
    return {
        "garbage.gguf": rewrite_gguf(chat_model_path, folder / "garbage.gguf", garbage_weights=1),
        "cond.gguf": rewrite_gguf(chat_model_path, folder / "cond.gguf",
                                  strings={DEFAULT_TEMPLATE: LOOP_ON_LONG_INPUT}),
    }


@pytest.mark.model
def test_the_real_template_renders_as_llama_cpp_python_would(chat_model: Any) -> None:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    vocab = chat_model._vocab
    eos_id, bos_id = vocab.token_eos(), vocab.token_bos()
    reference = Jinja2ChatFormatter(template=vocab.metadata[DEFAULT_TEMPLATE], stop_token_ids=[eos_id],
                                    eos_token=vocab._model.token_get_text(eos_id),
                                    bos_token=vocab._model.token_get_text(bos_id))
    for messages in (SAMPLE_MESSAGES, SAMPLE_MESSAGES[1:2], [{"role": "user", "content": "Résumé ✓"}]):
        ours = chat_model._formatter(messages=messages)
        theirs = reference(messages=messages)
        assert ours.prompt == theirs.prompt and ours.stop == theirs.stop and ours.added_special is True


@pytest.mark.model
def test_garbage_weights_are_refused_by_the_probe_and_otherwise_load_and_babble(real_hostile: dict[str, Path]) -> None:
    from app.llm.llama import LlamaChatModel

    path = real_hostile["garbage.gguf"]
    with pytest.raises(ModelError) as info:
        probe_gguf(path)
    assert "garbage.gguf loads, but its weights give non-finite outputs" in str(info.value)
    # Without the probe (a manifest model is trusted by its hash) the file loads: llama.cpp
    # computes NaN logits and samples a token anyway, so the answer is nonsense, not a crash.
    model = LlamaChatModel(path, context_size=256)
    try:
        result = model.chat([{"role": "user", "content": "Say hello."}], params=GenerationParams(max_tokens=8))
    finally:
        model.close()
    assert result.finish_reason in ("stop", "length") and result.usage.status == "success"
    assert not re.search(r"[A-Za-z]{3}", result.text), result.text  # no words


@pytest.mark.model
def test_a_template_looping_on_some_inputs_fails_that_answer_in_one_line(real_hostile: dict[str, Path]) -> None:
    from app.llm.llama import LlamaChatModel

    model = LlamaChatModel(real_hostile["cond.gguf"], context_size=512)
    try:
        ok = model.chat([{"role": "user", "content": "Say hi."}], params=GenerationParams(max_tokens=4))
        started = time.perf_counter()
        failed = model.chat([{"role": "user", "content": "In one sentence: what is a branch?"}],
                            params=GenerationParams(max_tokens=4))
        took = time.perf_counter() - started
        again = model.chat([{"role": "user", "content": "Say bye."}], params=GenerationParams(max_tokens=4))
    finally:
        model.close()
    assert ok.usage.status == "success" and again.usage.status == "success"
    assert failed.finish_reason == "error" and took < 5
    assert "the chat template of" in failed.usage.error and "cond.gguf did not finish within 2 s" in failed.usage.error


# --------------------------------------------------------------------------- the commands (processes)


def _ask_dir(tmp_path: Path, model: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "settings.json").write_text(json.dumps({"chat_model": str(model)}), encoding="utf-8")
    return data


@pytest.mark.model
@pytest.mark.slow
# One file per way of failing (the other templates take the loop's path, checked in process above):
# the template at load, the header, the path, the weights, the template at answer time.
@pytest.mark.usefixtures("embed_model_dir")
@pytest.mark.parametrize("name", ["loop.gguf", "nested.gguf", "linkloop.gguf", "garbage.gguf", "cond.gguf"])
def test_pcm_ask_ends_in_one_line_naming_the_file(tmp_path: Path, synthetic: dict[str, Path],
                                                  real_hostile: dict[str, Path], name: str) -> None:
    path = {**synthetic, **real_hostile}[name]
    data = _ask_dir(tmp_path, path)
    proc = _run(["-m", "app.cli", "--data-dir", str(data), "ask", "In one sentence: what is a branch?"], MODELS_DIR)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    last = _last_line(proc.stderr)
    assert last.startswith("pcm: error: ") and name in last, proc.stderr[-2000:]
    assert proc.seconds < 120  # type: ignore[attr-defined]


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.usefixtures("embed_model_dir")
@pytest.mark.parametrize("name", ["loop.gguf", "cond.gguf"])
def test_the_desktop_self_test_ends_with_a_line_naming_the_file(tmp_path: Path, synthetic: dict[str, Path],
                                                                 real_hostile: dict[str, Path], name: str) -> None:
    path = {**synthetic, **real_hostile}[name]
    data = _ask_dir(tmp_path, path)
    proc = _run(["-m", "app", "--data-dir", str(data), "--self-test", "In one sentence: what is a branch?"], MODELS_DIR)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    last = _last_line(proc.stderr)
    assert last.startswith("self-test: ") and name in last and "did not finish within 2 s" in last, proc.stderr[-2000:]

