"""Chat templates in the bounded worker: the same prompt as llama-cpp-python, and hostile ones end
as one-line errors within the time cap instead of hanging, recursing or eating memory."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.core.errors import ModelError
from app.llm.template import (
    DEFAULT_TEMPLATE,
    MAX_PROMPT_CHARS,
    SAMPLE_MESSAGES,
    TEMPLATE_TIMEOUT_S,
    ChatTemplates,
    template_sources,
)

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LOOP = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
# Passes the load-time sample (short user messages) and loops only on a long user message.
LOOP_ON_LONG_INPUT = (
    "{% for m in messages %}{% if m.role == 'user' and m.content|length > 30 %}"
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}"
    "{{ m.role }}: {{ m.content }}\n{% endfor %}"
)

HOSTILE: dict[str, tuple[str, str]] = {
    "loop": (LOOP, f"did not finish within {TEMPLATE_TIMEOUT_S:g} s"),
    "loop-while-compiling": ("{{ 9**(9**(9**9)) }}", f"did not finish within {TEMPLATE_TIMEOUT_S:g} s"),
    "recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursed without end"),
    "sandbox": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "refused by the Jinja sandbox (access to attribute"),
    "huge-range": ("{% for i in range(10**9) %}x{% endfor %}", "refused by the Jinja sandbox (Range too big"),
    "syntax": ("{% for m in messages %}{{ m.content }", "has a syntax error (line 1: unexpected '}')"),
    "unclosed-block": ("{% if messages %}hello", "has a syntax error (line 1: Unexpected end of template"),
    "memory": ("{{ 'x' * 10000000000 }}", "needed more than 512 MB of memory"),
    "huge-prompt": ("{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}", f"(limit {MAX_PROMPT_CHARS})"),
    "type-error": ("{{ 1 + 'a' }}", "failed (TypeError: unsupported operand"),
}


def _templates(source: str, name: str = "m.gguf") -> ChatTemplates:
    return ChatTemplates({DEFAULT_TEMPLATE: source}, f"models/{name}")


@pytest.fixture
def chatml() -> Iterator[ChatTemplates]:
    templates = _templates(CHATML)
    yield templates
    templates.close()


def _worker(templates: ChatTemplates) -> Any:
    """The worker process of ``templates`` (None when there is none)."""
    child = templates._child
    return None if child is None else child.proc


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_template_is_one_line_naming_the_file_within_the_cap(case: str) -> None:
    source, reason = HOSTILE[case]
    templates = _templates(source, f"{case}.gguf")
    started = time.perf_counter()
    try:
        with pytest.raises(ModelError) as info:
            templates.check()
    finally:
        templates.close()
    took = time.perf_counter() - started
    message = str(info.value)
    assert f"models/{case}.gguf" in message and reason in message, message
    assert "\n" not in message and "Traceback" not in message
    assert info.value.__cause__ is None and (info.value.__suppress_context__ or info.value.__context__ is None)
    assert took < TEMPLATE_TIMEOUT_S + 3  # the cap, plus starting Python on a busy machine


def test_a_template_that_loops_only_on_some_input_is_stopped_at_render_time() -> None:
    templates = _templates(LOOP_ON_LONG_INPUT)
    try:
        templates.check()  # the sample conversation passes
        first = _worker(templates)
        started = time.perf_counter()
        with pytest.raises(ModelError, match="did not finish within 2 s"):
            templates.render(DEFAULT_TEMPLATE, [{"role": "user", "content": "a long question " * 4}])
        assert time.perf_counter() - started < TEMPLATE_TIMEOUT_S + 1
        assert first.poll() is not None and _worker(templates) is None  # killed
        # A fresh worker serves the next request.
        assert templates.render(DEFAULT_TEMPLATE, [{"role": "user", "content": "short"}]) == "user: short\n"
        second = _worker(templates)
        assert second is not None and second.pid != first.pid
    finally:
        templates.close()
    assert second.poll() is not None


def test_a_template_that_raises_on_the_sample_passes_the_check_and_rejects_at_render_time() -> None:
    source = "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok"
    templates = _templates(source)
    try:
        templates.check()  # the messages are refused, not the file
        with pytest.raises(ModelError, match=r"of models/m.gguf rejected the messages \(System role not supported\)"):
            templates.render(DEFAULT_TEMPLATE, SAMPLE_MESSAGES)
        assert templates.render(DEFAULT_TEMPLATE, SAMPLE_MESSAGES[1:]) == "ok"
    finally:
        templates.close()


def test_every_named_template_is_checked_and_named() -> None:
    sources = template_sources({
        DEFAULT_TEMPLATE: CHATML, "tokenizer.chat_template.tool_use": LOOP, "general.name": "x", "other": LOOP,
    })
    assert sorted(sources) == [DEFAULT_TEMPLATE, "tokenizer.chat_template.tool_use"]
    templates = ChatTemplates(sources, "models/two.gguf")
    try:
        with pytest.raises(ModelError, match=r"the chat template 'tokenizer.chat_template.tool_use' of models/two.gguf"):
            templates.check()
    finally:
        templates.close()


def test_render_is_fast_and_close_ends_the_worker(chatml: ChatTemplates) -> None:
    chatml.check()
    started = time.perf_counter()
    for _ in range(50):
        prompt = chatml.render(DEFAULT_TEMPLATE, SAMPLE_MESSAGES)
    per_render = (time.perf_counter() - started) / 50
    assert prompt.endswith("<|im_start|>assistant\n") and "And a checkpoint?" in prompt
    assert per_render < 0.05
    worker = _worker(chatml)
    assert worker is not None and worker.poll() is None
    chatml.close()
    assert worker.poll() is not None and _worker(chatml) is None


def test_text_survives_the_round_trip(chatml: ChatTemplates) -> None:
    text = "naïve ✓ \u2028 \"quoted\" \\ back\nslash 中文 🙂"
    prompt = chatml.render(DEFAULT_TEMPLATE, [{"role": "user", "content": text}])
    assert f"<|im_start|>user\n{text}<|im_end|>" in prompt


def _llama_formatter(source: str, **kwargs: Any) -> Any:
    llama_chat_format = pytest.importorskip("llama_cpp.llama_chat_format")
    return llama_chat_format.Jinja2ChatFormatter(template=source, **kwargs)


@pytest.mark.parametrize("source", [
    CHATML,
    "{{ bos_token }}{% for m in messages %}[{{ m.role|upper }}] {{ m.content|trim }}{{ eos_token }}{% endfor %}",
    "{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}{{ m|tojson }}\n{% endfor %}",
    "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}{{ strftime_now('%Y') }}",
    "  {% if tools is none %}\n  no tools\n{% endif %}{{ messages|length }}",
])
def test_the_prompt_is_the_one_llama_cpp_python_renders(source: str) -> None:
    reference = _llama_formatter(source, eos_token="</s>", bos_token="<s>", stop_token_ids=[2])
    templates = _templates(source)
    templates.eos_token, templates.bos_token = "</s>", "<s>"
    try:
        for messages in (SAMPLE_MESSAGES, SAMPLE_MESSAGES[1:2], [{"role": "user", "content": "ünïcode ✓\n  spaced "}]):
            assert templates.render(DEFAULT_TEMPLATE, messages) == reference(messages=messages).prompt
    finally:
        templates.close()
