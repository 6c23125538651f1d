"""Tool policy of a Context Plan, and the clarification question (seed 000 §3.6.4).

``ToolSpec`` describes a tool (a built-in one, or one a tool server lists); ``tool_matches_statement``
says whether a profile statement ("never send emails", "never use the memory server") names it.
Which tools a turn offers is the plan's tool filter (:mod:`app.core.plan.tool_filter`).
``clarification_question`` asks the one question that resolves the intent's most important
uncertainty. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from pydantic import BaseModel, Field

from app.core.intent.model import Intent
from app.core.text.words import content_stems, stem, tokenize


class ToolSpec(BaseModel):
    """A tool the model may call; ``action`` marks tools that change things (write, send, delete):
    they run only after the user confirms. ``server`` names the tool server it comes from ("" for
    a built-in tool); its tools are named ``server.tool``."""

    name: str
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    action: bool = False
    server: str = ""

    @property
    def own_name(self) -> str:
        """The name the tool has on its server (``name`` without the ``server.`` prefix)."""
        prefix = f"{self.server}."
        return self.name[len(prefix):] if self.server and self.name.startswith(prefix) else self.name


class ToolSignals(BaseModel):
    """What the filter reads besides the tools and the intent, as observed for one input:
    ``similarity`` (tool name → cosine of the request's and the tool description's embeddings,
    rounded; only those at or above the floor are kept) and ``history`` (tool name → the calls
    this session made of it before this input)."""

    similarity: dict[str, float] = Field(default_factory=dict)
    history: dict[str, int] = Field(default_factory=dict)


#: A file name the input mentions ("notes/plan.md", "sales_q3.csv"): an extension starts with a letter.
_FILE_RE = re.compile(r"(?<![\w@])(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/])")
READS_FILES = frozenset({stem("read"), stem("file")})


def names_file(intent: Intent) -> bool:
    """True when the input itself names a file (reference material to read)."""
    return bool(_FILE_RE.search(intent.text))


# --------------------------------------------------------------------------- naming


def name_stems(name: str) -> list[str]:
    """The stems of a tool name's words (``read_text_file`` → read, text, fil)."""
    raw = name.replace("_", " ").replace("-", " ").replace(".", " ")
    return [stem(w) for w in tokenize(raw) if len(w) > 1]


def _same(a: str, b: str) -> bool:
    return a == b or (min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a)))


_SERVER_WORDS = frozenset({stem("server"), stem("tools"), stem("mcp")})


def tool_matches_statement(tool: ToolSpec, statement: str) -> bool:
    """True when ``statement`` ("send emails") names ``tool`` ("send_email"): verbatim, or every
    word of the tool's own name appears in it (prefix-tolerant: "pay" ~ "payment"); or it names
    the tool's server as a server ("use the memory server", "github tools")."""
    return _matches(tool.name, tool.server, statement)


@lru_cache(maxsize=65536)
def _matches(name: str, server: str, statement: str) -> bool:
    """``tool_matches_statement`` by value (a plan checks every tool against every prohibition)."""
    own = ToolSpec(name=name, server=server).own_name
    lowered = statement.lower()
    if name.lower() in lowered or (server and re.search(rf"(?<![\w.]){re.escape(own.lower())}(?!\w)", lowered)):
        return True
    names = name_stems(own)
    words = content_stems(statement)
    if server and _SERVER_WORDS & set(words) and set(name_stems(server)) <= set(words):
        return True
    return bool(names) and all(any(_same(n, w) for w in words) for n in names)


# --------------------------------------------------------------------------- clarification

_PHRASE = {"qa": "answer a question", "task": "carry out a task", "interrupt": "change the task that is running",
           "push": "look at the recent changes", "clarify": "wait for more detail",
           "retrieval": "look something up", "generation": "write something new", "change": "change something",
           "diagnostic": "find out what went wrong", "planning": "make a plan"}


def _top2(dist: Mapping[str, float]) -> list[str]:
    return sorted(dist, key=lambda k: (-dist[k], k))[:2]


def clarification_question(intent: Intent, running_tasks: Sequence[str] = ()) -> str:
    """One question that resolves the most important uncertainty of ``intent`` (deterministic)."""
    details: dict[str, str] = {}
    for r in intent.uncertainty_reasons:
        code, _, detail = r.partition(":")
        details.setdefault(code, detail.strip())
    goal = intent.goal or "this"
    if "prohibition_conflict" in details:
        return (f"Your profile says \"{details['prohibition_conflict']}\", and this request seems to go against "
                f"it. Should I go ahead anyway, or change the request?")
    if "high_risk_action" in details:
        return (f"This would {details['high_risk_action']} something, which is hard to undo. "
                f"Should I go ahead with \"{goal}\"?")
    if "ambiguous_task" in details:
        names = ", ".join(f"\"{n}\"" for n in running_tasks[:4])
        return f"Several tasks are running{': ' + names if names else ''}. Which one do you mean?"
    if "empty_input" in details:
        return "What would you like me to do?"
    if "vague_goal" in details:
        if intent.entities:
            return f"What exactly would you like me to do with {intent.entities[0]}?"
        return "I couldn't tell what this refers to. Could you say a bit more about what you want?"
    for code, fld in (("low_mode_confidence", "mode"), ("low_task_confidence", "task_type")):
        if code in details and len(intent.distribution.get(fld, {})) >= 2:
            a, b = _top2(intent.distribution[fld])
            return f"Should I {_PHRASE.get(a, a)} or {_PHRASE.get(b, b)} here?"
    return f"Just to check before I start: you want me to {goal.rstrip('?.')}? Anything I should know first?"
