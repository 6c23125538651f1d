"""GGUF chat templates, compiled and rendered in a worker process bounded in time and memory.

A GGUF file's chat template (``tokenizer.chat_template``, and any ``tokenizer.chat_template.NAME``)
is Jinja code that comes with the file. Rendered in process, as llama-cpp-python does, a hostile
or broken one hangs the app (a loop over ``range(100000)`` inside another, constant folding of
``9**9**9**9`` while compiling), exhausts memory (``"x" * 10**10``) or recurses until Python gives
up. Here every template is handled by a child process (``app/llm/template_worker.py``):

* ``ChatTemplates.check()`` compiles every template and renders a sample conversation with each,
  so a template that never finishes, does not compile, or is refused by the Jinja sandbox is
  refused when the model is loaded or probed, before llama.cpp (whose Python binding compiles
  the templates in process) ever sees the file;
* ``ChatTemplates.render()`` renders the real messages there too, because a template can behave
  only for some inputs.

Each request has a time cap (``TEMPLATE_TIMEOUT_S``, 2 s; the child is killed when it runs over
and a fresh one is started for the next request) and the child's address space is capped
(``TEMPLATE_MEMORY_BYTES``). Every failure is a ``ModelError`` whose one line names the file and
what its template did. A render costs a round trip of well under a millisecond.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.core.errors import ModelError
from app.frozen import child_options, python_command

TEMPLATE_TIMEOUT_S = 2.0
TEMPLATE_MEMORY_BYTES = 512 << 20
START_TIMEOUT_S = 30.0  # starting Python and importing jinja2, on a busy machine
MAX_PROMPT_CHARS = 8_000_000
DEFAULT_TEMPLATE = "tokenizer.chat_template"
# Files of these architectures without a template are prompted with Gemma's turns, not ChatML.
GEMMA_ARCHITECTURES = frozenset({"gemma", "gemma2", "gemma3"})
_WORKER = Path(__file__).with_name("template_worker.py")
_PICK_ANOTHER = "pick another .gguf model"

# A conversation like the ones the engine sends: a system message, turns, a new user input.
SAMPLE_MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "What is a branch?"},
    {"role": "assistant", "content": "A line of work that continues from an earlier point."},
    {"role": "user", "content": "And a checkpoint?"},
]


def template_sources(metadata: Mapping[str, object]) -> dict[str, str]:
    """The chat templates a GGUF header declares (the keys llama-cpp-python compiles)."""
    return {key: value for key, value in metadata.items()
            if isinstance(value, str) and (key == DEFAULT_TEMPLATE or key.startswith(DEFAULT_TEMPLATE + "."))}


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


class _Child:
    """One worker process and the thread that reads its replies."""

    def __init__(self, memory_bytes: int) -> None:
        self.proc = subprocess.Popen(
            python_command("-P", str(_WORKER), str(memory_bytes)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
            **child_options(),
        )
        self.replies: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, name="pcm-template-reader", daemon=True).start()

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            for line in stdout:
                self.replies.put(line)
        except (OSError, ValueError):
            pass
        self.replies.put(None)

    def send(self, payload: Mapping[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(payload).encode("ascii") + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout_s: float) -> dict[str, Any] | None:
        """The next reply; None when the child ended; ``queue.Empty`` when none came in time."""
        line = self.replies.get(timeout=timeout_s)
        return None if line is None else json.loads(line)


class ChatTemplates:
    """The chat templates of one GGUF file (``shown`` names it in messages), rendered in a bounded
    worker process. Thread-safe: requests are serialised. ``close()`` ends the worker."""

    def __init__(
        self,
        templates: Mapping[str, str],
        shown: str,
        *,
        timeout_s: float = TEMPLATE_TIMEOUT_S,
        memory_bytes: int = TEMPLATE_MEMORY_BYTES,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.templates = dict(templates)
        self.shown = shown
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self.start_timeout_s = start_timeout_s
        self.bos_token = ""
        self.eos_token = ""
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._finalizer: weakref.finalize | None = None

    def __contains__(self, name: object) -> bool:
        return name in self.templates

    # ------------------------------------------------------------------ public

    def check(self) -> None:
        """Compile every template and render ``SAMPLE_MESSAGES`` with each; ``ModelError`` when one
        does not compile, runs over the time or memory cap, recurses without end, or is refused by
        the sandbox. A template that merely rejects the sample (``raise_exception``, e.g. "system
        role not supported") passes: it is the messages it refuses, not the file."""
        for name in self.templates:
            try:
                self.render(name, SAMPLE_MESSAGES)
            except _Rejected:
                pass

    def render(self, name: str, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> str:
        """The prompt template ``name`` makes of ``messages`` (the generation prompt added, as
        llama-cpp-python's ``Jinja2ChatFormatter`` renders it); ``ModelError`` on any failure."""
        variables = {"eos_token": self.eos_token, "bos_token": self.bos_token, "add_generation_prompt": True,
                     "functions": None, "function_call": None, "tools": None, "tool_choice": None, **kwargs}
        request = {"op": "render", "name": name, "messages": [dict(m) for m in messages], "kwargs": variables,
                   "max_chars": MAX_PROMPT_CHARS}
        with self._lock:
            child = self._ensure_child()
            reply = self._ask(child, request, name)
        if not reply.get("ok"):
            raise self._failure(name, reply)
        return str(reply["prompt"])

    def close(self) -> None:
        """End the worker process (a later request starts a new one)."""
        with self._lock:
            self._stop()

    # ------------------------------------------------------------------ the worker

    def _ensure_child(self) -> _Child:
        if self._child is not None and self._child.proc.poll() is None:
            return self._child
        self._stop()
        try:
            child = _Child(self.memory_bytes)
        except OSError as exc:
            raise ModelError(f"could not start a process to check the chat template of {self.shown} ({exc}); "
                             "check the installation") from None
        self._child = child
        self._finalizer = weakref.finalize(self, _kill, child.proc)
        try:
            ready = child.reply(self.start_timeout_s)
        except (queue.Empty, ValueError):
            ready = None
        if not ready or not ready.get("ready"):
            code = child.proc.poll()
            self._stop()
            why = f"it ended with status {code}" if code is not None else f"not within {self.start_timeout_s:g} s"
            raise ModelError(f"the process that renders chat templates did not start ({why}; checking "
                             f"{self.shown}); check the installation")
        reply = self._ask(child, {"op": "compile", "templates": self.templates}, "")
        if not reply.get("ok"):
            self._stop()
            raise self._failure(str(reply.get("name") or DEFAULT_TEMPLATE), reply)
        return child

    def _ask(self, child: _Child, request: Mapping[str, Any], name: str) -> dict[str, Any]:
        """Send ``request`` and wait at most ``timeout_s`` for the reply; the worker is killed
        (and a ``ModelError`` raised) when it runs over or dies."""
        try:
            # The worker's own backstop: it ends itself a little after the cap, should this
            # process die before it could kill it.
            child.send({**request, "alarm_s": int(self.timeout_s) + 3})
            reply = child.reply(self.timeout_s)
        except queue.Empty:
            self._stop()
            raise self._failure(name or DEFAULT_TEMPLATE, {"kind": "timeout"}) from None
        except (OSError, ValueError):
            reply = None
        if reply is None:
            code = child.proc.poll()
            self._stop()
            raise self._failure(name or DEFAULT_TEMPLATE, {"kind": "crashed", "message": f"exit status {code}"})
        return reply

    def _stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # kills the child at most once
            self._finalizer = None
        self._child = None

    # ------------------------------------------------------------------ messages

    def _failure(self, name: str, reply: Mapping[str, Any]) -> ModelError:
        """One line naming the file, the template and what it did."""
        kind, detail = str(reply.get("kind", "error")), str(reply.get("message", ""))
        which = "the chat template" if name == DEFAULT_TEMPLATE else f"the chat template {name!r}"
        reasons = {
            "timeout": f"did not finish within {self.timeout_s:g} s (an endless or enormous loop?)",
            "syntax": f"has a syntax error ({detail})",
            "sandbox": f"was refused by the Jinja sandbox ({detail})",
            "recursion": "recursed without end",
            "memory": f"needed more than {self.memory_bytes >> 20} MB of memory",
            "too_long": f"made a prompt of {detail} (limit {MAX_PROMPT_CHARS})",
            "crashed": f"crashed the process rendering it ({detail})",
        }
        if kind == "raised":
            return _Rejected(f"{which} of {self.shown} rejected the messages ({detail})")
        reason = reasons.get(kind, f"failed ({detail})")
        return ModelError(f"{which} of {self.shown} {reason}; {_PICK_ANOTHER}")


class TemplateFormatter:
    """A llama-cpp-python chat formatter over ``ChatTemplates``: the prompt comes from the bounded
    worker; stop string, stop token and ``added_special`` are what ``Jinja2ChatFormatter`` returns."""

    def __init__(self, templates: ChatTemplates, llama_cpp: Any, eos_id: int) -> None:
        self.templates = templates
        self.llama_cpp = llama_cpp
        self.eos_id = eos_id

    def __call__(self, *, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        prompt = self.templates.render(DEFAULT_TEMPLATE, messages, **kwargs)
        eos_id = self.eos_id

        def stop_on_last_token(tokens: Any, _logits: Any) -> bool:
            return bool(tokens[-1] == eos_id)

        return self.llama_cpp.llama_chat_format.ChatFormatterResponse(
            prompt=prompt,
            stop=[self.templates.eos_token],
            stopping_criteria=self.llama_cpp.StoppingCriteriaList([stop_on_last_token]),
            added_special=True,
        )


class _Rejected(ModelError):
    """The template itself raised (``raise_exception``): the messages are refused, not the file."""
