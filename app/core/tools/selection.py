"""How a turn's tool calls are chosen: deterministic rules first, the local model only when unsure.

A 135M model cannot be trusted with free-form function calling, so ``select_by_rules`` maps the
user's own words (never file, feed or tool content) and the intent onto calls: a file the input
names that exists in a watched folder → ``read_file``; news / feed items → ``list_recent_feed_items``;
"remind me …", "add a task …" → ``create_task``; "mark … done" → ``update_task``; "what did we
say about X" → ``search_memory``. Only tools the plan offered are ever chosen.

When no rule fires but the input speaks of something an offered tool handles, ``rules_unsure``
says so and the engine may ask the model for JSON constrained by ``tool_choice_schema``: an enum
of the offered names plus "none" (a blocked tool cannot even be generated) and one string
argument. ``parse_model_choice`` accepts only offered names. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.core.intent.model import Intent, Mode
from app.core.text.words import content_stems, stem
from app.core.tools.model import ToolChoice
from app.core.types import Task, TaskStatus

_PATH_RE = re.compile(r"(?<![\w@])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/])")
_FEED_RE = re.compile(r"\b(news|feeds?|rss|atom|headlines?|articles?|posts?|feed items?)\b", re.I)
_COUNT_RE = re.compile(r"\b(\d{1,2})\b")
_CREATE_RE = re.compile(
    r"^\s*(?:please\s+|pls\s+)?(?:remind\s+me\s+(?:to\s+|about\s+)?|"
    r"(?:add|create|make|open|start)\s+(?:a\s+|an\s+)?(?:new\s+)?(?:task|todo|to-do|reminder)\s*(?:to\s+|for\s+|:|-)?\s*|"
    r"new\s+(?:task|todo)\s*[:\-]?\s*)(?P<name>\S.*?)[.!]?\s*$", re.I)
_ADD_TO_LIST_RE = re.compile(r"^\s*(?:please\s+)?add\s+(?P<name>\S.*?)\s+to\s+(?:my|the)\s+(?:todo|to-do|task)\s*list\b", re.I)
_UPDATE_RE = re.compile(
    r"\bmark\s+(?:the\s+)?(?P<name>.+?)\s+(?:task\s+)?(?:as\s+)?"
    r"(?P<status>done|complete|completed|finished|failed|blocked|active|started|pending)\b", re.I)
_STATUS = {"done": TaskStatus.COMPLETE, "complete": TaskStatus.COMPLETE, "completed": TaskStatus.COMPLETE,
           "finished": TaskStatus.COMPLETE, "failed": TaskStatus.FAILED, "blocked": TaskStatus.BLOCKED,
           "active": TaskStatus.ACTIVE, "started": TaskStatus.ACTIVE, "pending": TaskStatus.PENDING}
_SEARCH_RES = (
    re.compile(r"\bwhat\s+(?:did|have|had)\s+(?:we|i|you)\s+(?:say|said|discuss(?:ed)?|decide(?:d)?|agree(?:d)?|"
               r"note(?:d)?|write|written)\s+(?:about|on|regarding|for)\s+(?P<q>.+)", re.I),
    re.compile(r"\b(?:do|did)\s+(?:you|we)\s+(?:remember|recall|discuss|talk\s+about)\s+(?P<q>.+)", re.I),
    re.compile(r"\bsearch\s+(?:in\s+)?(?:my\s+|the\s+|our\s+)?(?:memory|notes|history|conversation)\s+(?:for\s+)?(?P<q>.+)", re.I),
    re.compile(r"\b(?:look\s+up|find)\s+(?:what\s+)?(?:we|i)\s+(?:said|wrote|noted)\s+(?:about\s+)?(?P<q>.+)", re.I),
)
#: Words that say the user speaks of something a tool handles (for ``rules_unsure``).
_CUE_STEMS = frozenset(stem(w) for w in "file files document folder feed feeds news rss article task todo "
                       "reminder remind memory notes search".split())


def path_mentions(text: str, intent: Intent) -> list[str]:
    """File-like names the input itself mentions (``notes/plan.md``, ``plan.md``), in order."""
    found: dict[str, None] = {}
    for m in _PATH_RE.finditer(text):
        found.setdefault(m.group(1).strip("."), None)
    for e in intent.entities:
        if ("." in e or "/" in e) and e.lower() in text.lower() and _PATH_RE.fullmatch(e):
            found.setdefault(e, None)
    return list(found)  # an extension starts with a letter: "v3.5" is a version, not a file


def _clean(text: str) -> str:
    return text.strip().strip("?.!\"'").strip()


def best_task(name: str, tasks: Sequence[Task]) -> Task | None:
    """The task whose name shares the most content words with ``name`` (at least half of them)."""
    want = set(content_stems(name)) - {"task"}
    if not want:
        return None
    scored = []
    for n, task in enumerate(tasks):
        have = set(content_stems(task.name))
        share = len(want & have) / len(want)
        if share >= 0.5:
            scored.append((-share, -n, task))  # ties: the latest task
    return min(scored, key=lambda x: (x[0], x[1]))[2] if scored else None


def _task_choices(text: str, can: set[str], tasks: Sequence[Task]) -> list[ToolChoice]:
    """create_task for "add a task: …", update_task for "mark <task> done" (a known task)."""
    out: list[ToolChoice] = []
    create = _CREATE_RE.match(text) or _ADD_TO_LIST_RE.match(text)
    if create and "create_task" in can:
        name = _clean(create.group("name"))
        if name:
            out.append(ToolChoice(tool="create_task", args={"name": name}, reason=f"asked to add a task: {name!r}"))
    update = _UPDATE_RE.search(text)
    if update and "update_task" in can:
        task = best_task(update.group("name"), tasks)
        status = _STATUS[update.group("status").lower()]
        if task is not None:
            out.append(ToolChoice(tool="update_task", args={"task": task.task_id, "status": status.value},
                                  reason=f"asked to mark {task.name!r} {status.value}"))
    return out


def _file_choices(text: str, intent: Intent, can: set[str], files: Mapping[str, str],
                  readers: Sequence[tuple[str, str]]) -> list[ToolChoice]:
    """read_file for each mentioned path that was found in a watched folder; for the others, the
    first offered tool server's file reader (``readers``: tool name and its path argument)."""
    out = []
    for mention in path_mentions(text, intent):
        if mention in files and "read_file" in can:
            out.append(ToolChoice(tool="read_file", args={"path": files[mention]},
                                  reason=f"the input names {mention!r}, a file in a watched folder"))
        elif readers:
            tool, arg = readers[0]
            out.append(ToolChoice(tool=tool, args={arg: mention},
                                  reason=f"the input names {mention!r}; {tool} reads files"))
    return out


def _feed_choices(text: str, can: set[str]) -> list[ToolChoice]:
    """list_recent_feed_items when asked about news (n from "the last 3 …", else 5)."""
    if "list_recent_feed_items" not in can or not _FEED_RE.search(text):
        return []
    count = _COUNT_RE.search(text)
    n = max(1, min(20, int(count.group(1)))) if count else 5
    return [ToolChoice(tool="list_recent_feed_items", args={"n": n}, reason="asked about news / feed items")]


def _memory_choices(text: str, can: set[str]) -> list[ToolChoice]:
    """search_memory for the first "what did we say about …" pattern that names something."""
    if "search_memory" not in can:
        return []
    for pattern in _SEARCH_RES:
        m = pattern.search(text)
        if m and _clean(m.group("q")):
            return [ToolChoice(tool="search_memory", args={"query": _clean(m.group("q"))},
                               reason="asked what was said before")]
    return []


def select_by_rules(
    text: str,
    intent: Intent,
    offered: Sequence[str],
    *,
    files: Mapping[str, str],
    tasks: Sequence[Task] = (),
    readers: Sequence[tuple[str, str]] = (),
) -> list[ToolChoice]:
    """The calls the rules choose for ``text``, in order (only offered tools).

    ``files`` maps the paths the input mentions (``path_mentions``) to the path found inside a
    watched folder (looked up beforehand: the rules do no I/O); ``tasks`` are the session's tasks;
    ``readers`` the offered tool servers' file readers, best first (``file_readers``).
    """
    if intent.mode not in (Mode.QA, Mode.TASK):
        return []  # interruptions, pushes and clarifications run no tools of their own
    can = set(offered)
    out = (_task_choices(text, can, tasks) + _file_choices(text, intent, can, files, readers)
           + _feed_choices(text, can) + _memory_choices(text, can))
    seen: set[tuple[str, str]] = set()
    unique = []
    for choice in out:
        key = (choice.tool, repr(sorted(choice.args.items())))
        if key not in seen:
            seen.add(key)
            unique.append(choice)
    return unique


def file_readers(tools: Sequence[tuple[str, str, str | None]]) -> list[tuple[str, str]]:
    """Of offered (name, server, primary argument) triples, in order, the tool servers' tools that
    read a file by its path: their names say read and file, their one argument is a path."""
    out = []
    for name, server, arg in tools:
        words = {stem(w) for w in re.split(r"[\W_]+", name.removeprefix(f"{server}.").lower()) if w}
        if server and arg and {stem("read"), stem("file")} <= words and re.search(r"path|file", arg, re.I):
            out.append((name, arg))
    return out


def rules_unsure(text: str, intent: Intent, offered: Sequence[str], chosen: Sequence[ToolChoice],
                 *, strong: bool = False) -> bool:
    """True when no rule fired but the input speaks of what an offered tool handles (files,
    feeds, tasks, memory), or the plan's filter found an offered tool a strong match (``strong``):
    the case where asking the model is worth its time."""
    if chosen or not offered or intent.mode not in (Mode.QA, Mode.TASK):
        return False
    return strong or bool(set(content_stems(text)) & _CUE_STEMS)


def tool_choice_schema(names: Sequence[str]) -> dict[str, Any]:
    """JSON schema (→ grammar) of a model's choice: one of ``names`` (offered + "none") and one
    string argument. Nothing outside ``names`` can be generated under the grammar."""
    return {
        "type": "object",
        "properties": {"tool": {"type": "string", "enum": list(names)},
                       "argument": {"type": "string", "maxLength": 200}},
        "required": ["tool", "argument"],
        "additionalProperties": False,
    }


def tool_choice_messages(text: str, tools: Sequence[tuple[str, str, str | None]]) -> list[dict[str, str]]:
    """The chat prompt for a model choice; ``tools`` are (name, description, argument name)."""
    lines = [f"- {name}: {desc}" + (f" (argument: {arg})" if arg else "") for name, desc, arg in tools]
    system = ("Pick the one tool that helps answer the user's message, or none. Reply with JSON "
              '{"tool": name, "argument": text}.\nTools:\n' + "\n".join(lines) + "\n- none: no tool is needed")
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


def parse_model_choice(parsed: Any, primary_args: Mapping[str, str | None]) -> ToolChoice | None:
    """A ``ToolChoice`` from the model's parsed JSON, or None ("none", an unknown or not offered
    name, a missing argument). ``primary_args`` maps each offered tool to its argument name."""
    if not isinstance(parsed, dict):
        return None
    name = parsed.get("tool")
    if not isinstance(name, str) or name not in primary_args:
        return None
    arg_name = primary_args[name]
    argument = parsed.get("argument")
    if arg_name is None:
        return ToolChoice(tool=name, args={}, chosen_by="model", reason="chosen by the model")
    if not isinstance(argument, str) or not argument.strip():
        return None
    return ToolChoice(tool=name, args={arg_name: argument.strip()}, chosen_by="model", reason="chosen by the model")


# --------------------------------------------------------------------------- arguments of a tool server's tool

_SIMPLE = {"string", "number", "integer", "boolean"}


def argument_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The part of a tool's input schema a small model can fill under a grammar: its top-level
    arguments of simple types (strings, numbers, booleans), lists of those, and lists of objects
    made of those (``[{"name", "entityType", "observations": [...]}]``), required ones kept; None
    when it has none."""
    return _object_schema(schema, depth=2)


def _object_schema(schema: Mapping[str, Any], depth: int) -> dict[str, Any] | None:
    props: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        kept = _property_schema(prop, depth) if isinstance(prop, dict) else None
        if kept is not None:
            props[name] = kept
    if not props:
        return None
    required = [n for n in schema.get("required") or [] if n in props]
    if len(required) < len([n for n in schema.get("required") or []]):
        return None  # a required argument it cannot fill: better no call than a broken one
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def _property_schema(prop: Mapping[str, Any], depth: int) -> dict[str, Any] | None:
    kind = prop.get("type")
    if kind in _SIMPLE:
        out: dict[str, Any] = {"type": kind}
        if isinstance(prop.get("enum"), list):
            out["enum"] = prop["enum"]
        if kind == "string":
            out["maxLength"] = 200
        return out
    items = prop.get("items")
    if kind != "array" or not isinstance(items, dict):
        return None
    if items.get("type") in _SIMPLE:
        return {"type": "array", "items": {"type": items["type"]}, "maxItems": 5}
    if items.get("type") == "object" and depth > 1:
        inner = _object_schema(items, depth - 1)
        return {"type": "array", "items": inner, "maxItems": 3} if inner is not None else None
    return None


def argument_messages(text: str, name: str, description: str, schema: Mapping[str, Any]) -> list[dict[str, str]]:
    """The chat prompt that fills one chosen tool's arguments from the user's message."""
    params = ", ".join(f"{k} ({v.get('type')})" for k, v in schema.get("properties", {}).items())
    system = (f"Fill in the arguments of the tool {name}: {description}\nArguments: {params}.\n"
              "Use only what the user's message says. Reply with JSON.")
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


def parse_arguments(parsed: Any, schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The model's arguments, kept to the schema's properties; None unless every required one is there."""
    if not isinstance(parsed, dict):
        return None
    props = schema.get("properties", {})
    args = {k: v for k, v in parsed.items() if k in props and v not in (None, "")}
    return args if all(k in args for k in schema.get("required", [])) else None
