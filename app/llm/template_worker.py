"""The chat-template worker: a child process that compiles and renders GGUF chat templates.

Run by ``app.llm.template.ChatTemplates`` as ``python -P template_worker.py MEMORY_BYTES``; it
imports nothing from ``app`` (only the standard library and jinja2), caps its own address space,
then answers one JSON request per line on stdin with one JSON reply per line on stdout:

* ``{"op": "compile", "templates": {name: source}}`` → ``{"ok": true}`` or an error for the
  first template that does not compile (``"name"`` says which);
* ``{"op": "render", "name": ..., "messages": [...], "kwargs": {...}, "max_chars": N}`` →
  ``{"ok": true, "prompt": "..."}`` or an error.

An error reply is ``{"ok": false, "kind": ..., "message": ...}`` with ``kind`` one of syntax,
sandbox, recursion, memory, raised, too_long, error. The Jinja environment is the one
llama-cpp-python's ``Jinja2ChatFormatter`` builds (sandboxed, ``trim_blocks``,
``lstrip_blocks``, loop controls, the ``{% generation %}`` tag, its ``tojson``), with the same
render variables, so a prompt rendered here is the prompt llama-cpp-python would make
(``tests/llm/test_template.py`` checks it). The parent bounds the time of every request by
killing this process.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

_MAX_MESSAGE = 300


def _limit_memory(limit: int) -> None:
    """Cap the address space (POSIX only) so a template that allocates gigabytes fails here with
    ``MemoryError`` instead of exhausting the machine."""
    try:
        import resource
    except ImportError:  # Windows: the time cap still applies
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass


def _environment() -> Any:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class IgnoreGenerationTags(jinja2.ext.Extension):
        """Pass-through for HuggingFace's ``{% generation %}`` chat-template tag."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            parser.stream.skip(1)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    env = ImmutableSandboxedEnvironment(
        loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True,
        extensions=[IgnoreGenerationTags, jinja2.ext.loopcontrols],
    )

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    return env


def _short(text: object) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 1] + "…"


def _error(exc: BaseException) -> dict[str, Any]:
    """The reply for a failure, classified so the parent can say what the template did."""
    from jinja2.exceptions import SecurityError, TemplateSyntaxError

    if isinstance(exc, TemplateSyntaxError):
        return {"ok": False, "kind": "syntax", "message": f"line {exc.lineno}: {_short(exc.message)}"}
    if isinstance(exc, SecurityError):
        return {"ok": False, "kind": "sandbox", "message": _short(exc)}
    if isinstance(exc, RecursionError):
        return {"ok": False, "kind": "recursion", "message": _short(exc)}
    if isinstance(exc, MemoryError):
        return {"ok": False, "kind": "memory", "message": ""}
    if isinstance(exc, OverflowError) and "range" in str(exc).lower():  # the sandbox's MAX_RANGE
        return {"ok": False, "kind": "sandbox", "message": _short(exc)}
    if type(exc) is ValueError:  # raise_exception(...) in the template
        return {"ok": False, "kind": "raised", "message": _short(exc)}
    return {"ok": False, "kind": "error", "message": _short(f"{type(exc).__name__}: {exc}")}


class _Worker:
    def __init__(self) -> None:
        self.env = _environment()
        self.compiled: dict[str, Any] = {}

    def compile(self, templates: dict[str, str]) -> dict[str, Any]:
        self.compiled = {}
        for name, source in templates.items():
            try:
                self.compiled[name] = self.env.from_string(source)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                return {**_error(exc), "name": name}
        return {"ok": True}

    def render(self, request: dict[str, Any]) -> dict[str, Any]:
        def raise_exception(message: str) -> None:
            raise ValueError(message)

        def strftime_now(fmt: str) -> str:
            return datetime.now().strftime(fmt)

        template = self.compiled[request["name"]]
        kwargs = dict(request.get("kwargs") or {})
        prompt = template.render(
            messages=request["messages"], raise_exception=raise_exception, strftime_now=strftime_now, **kwargs,
        )
        if len(prompt) > int(request["max_chars"]):
            return {"ok": False, "kind": "too_long", "message": f"{len(prompt)} characters"}
        return {"ok": True, "prompt": prompt}

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        _alarm(int(request.get("alarm_s", 0)))
        try:
            if request.get("op") == "compile":
                return self.compile(request["templates"])
            return self.render(request)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            return _error(exc)
        finally:
            _alarm(0)


def _alarm(seconds: int) -> None:
    """Arm (or with 0 disarm) SIGALRM, left at its default action: the kernel ends this process
    when a request runs past ``seconds`` even inside C code, should the parent be gone and not
    kill it. POSIX only."""
    import signal

    if hasattr(signal, "alarm"):
        signal.alarm(seconds)


def main() -> int:
    _limit_memory(int(sys.argv[1]) if len(sys.argv) > 1 else 512 << 20)
    out = sys.stdout
    worker = _Worker()
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        try:
            reply = worker.handle(json.loads(line))
            text = json.dumps(reply)
        except MemoryError:
            text = '{"ok": false, "kind": "memory", "message": ""}'
        out.write(text + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
