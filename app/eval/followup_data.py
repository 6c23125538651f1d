"""The follow-up dev set: single-user sessions of interleaved real conversations, made at run time.

Made from LoCoMo (``../shared/data/locomo-dev``: Maharana et al., ACL 2024, CC BY-NC 4.0 — read
where it lies, never copied into the repository; ``pcm eval followups`` builds the sessions in
memory each time, ``--write DIR`` keeps a copy outside the repository for reading).

Each LoCoMo session is a real conversation between two people; its first speaker plays the user,
the other one's reply to each of the user's lines is the answer, so an *exchange* is (the user's
line, the reply). A *unit* is the first ``exchanges`` exchanges of one LoCoMo session. Dev session
``i`` interleaves the units of session ``D<i>`` of each LoCoMo conversation (different people,
so different topics) the way one person juggles several threads: it starts with one unit, then,
with a seeded random schedule, either goes on with the unit it is in (a *stay*: the input follows
up the most recent exchange), starts another unit (*new*: a new conversation), or goes back to a
unit it left (a *return*). A return is placed only where the input's own words point back to its
conversation — ``RETURN_WORDS`` content words said earlier in that conversation and in none of the
others started — as a person going back to a thread names it; otherwise the schedule stays or starts a new unit.
The gold of every input is the conversation it continues (None for a new one).

The user's lines are cleaned of what a person would not type to an assistant: photo captions
("[image: …]") and the other speaker's name used as a form of address ("Thanks, Mel!"). The two
halves (``half`` "A": odd session numbers, "B": even) are for fitting on one and reporting the other.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

#: Words too common in chat to say which conversation a line belongs to (the data side's own
#: list, kept apart from the product's stop words so the dev set does not mirror the router).
_COMMON = frozenset("""
about after again also always amazing anything around awesome back been before being best
better could didn doing done enjoy even ever every feel feeling felt from fun glad going gonna
good great happy have having here hope just keep kind know last like little look looking lots
love made make many maybe more most much need never nice only other over people pretty really
right same say said should since some something sounds still stuff such sure take than thank
thanks that thats their them then there these they thing things think this those thought time
today together totally very want well went were what when where which while will with wonderful
would wow yeah year years your yours that's it's i'm you're i've don't can't cool super stoked
""".split())
_WORD = re.compile(r"[a-z][a-z']{3,}")
_IMAGE = re.compile(r"\s*\[image:[^\]]*\]")


@dataclass(frozen=True)
class FollowupTurn:
    """One input of a dev session: the user's text, the reply that answered it, the conversation it
    belongs to (``conversation``), and whether it starts it (``kind`` "new"), follows the previous
    input's conversation ("stay") or goes back to a conversation left earlier ("return")."""

    id: str
    text: str
    answer: str
    conversation: str
    kind: str
    at: str


@dataclass(frozen=True)
class FollowupSession:
    """A dev session: its id, its half ("A" or "B") and its inputs in order."""

    id: str
    half: str
    turns: tuple[FollowupTurn, ...] = field(default_factory=tuple)


@dataclass
class _Unit:
    """One conversation being interleaved: its exchanges and how far the session has got."""

    name: str
    exchanges: list[tuple[str, str, str]]  # (message id, user text, reply)
    next: int = 0
    words: set[str] = field(default_factory=set)  # content words said so far

    def left(self) -> bool:
        return self.next < len(self.exchanges)


def content_words(text: str) -> set[str]:
    """The data side's content words of ``text``: lower-case words of 4+ letters, not chat filler."""
    return {w.strip("'") for w in _WORD.findall(text.lower())} - _COMMON


def _names(speakers: Iterable[str]) -> re.Pattern[str]:
    """A speaker's name or its short forms (Mel, Caro) used as a form of address."""
    forms = sorted({n[:k] for n in speakers for k in range(3, len(n) + 1)}, key=len, reverse=True)
    return re.compile(r"(?:,\s*)?\b(?:" + "|".join(map(re.escape, forms)) + r")\b(?!['\u2019]s)")


def clean(text: str, names: re.Pattern[str]) -> str:
    """``text`` without photo captions and without the speakers' names used to address them."""
    text = names.sub("", _IMAGE.sub("", text))
    text = re.sub(r"\s+([,!?.])", r"\1", re.sub(r"\s{2,}", " ", text))
    text = re.sub(r"^[,!.\s]+", "", re.sub(r"([!?.]),", r"\1", text))
    return text.strip()


def load_units(locomo_dir: Path, exchanges: int) -> dict[str, list[tuple[str, str, str]]]:
    """LoCoMo session name ("conv-26/D3") → its first ``exchanges`` exchanges, in file order."""
    sessions: dict[str, list[dict[str, str]]] = {}
    with (locomo_dir / "messages.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rec = json.loads(line)
                sessions.setdefault(str(rec["id"]).rsplit(":", 1)[0], []).append(rec)
    units: dict[str, list[tuple[str, str, str]]] = {}
    for name, lines in sessions.items():
        names = _names({str(r["author"]) for r in lines})
        user = lines[0]["author"]
        pairs: list[tuple[str, str, str]] = []
        for said, reply in zip(lines, lines[1:], strict=False):
            if said["author"] == user and reply["author"] != user:
                text, answer = clean(said["text"], names), clean(reply["text"], names)
                if content_words(text) and answer:
                    pairs.append((str(said["id"]), text, answer))
        units[name] = pairs[:exchanges]
    return units


#: How many of its content words a return must share with its own conversation, and with no
#: other conversation started so far: how a person going back to a thread names it.
RETURN_WORDS = 2


def _points(unit: _Unit, others: Sequence[_Unit]) -> bool:
    """Whether the next input of ``unit`` names its conversation: ``RETURN_WORDS`` content words
    said earlier in it and in no other conversation started so far."""
    said = content_words(unit.exchanges[unit.next][1])
    return len(said & unit.words - set().union(*(o.words for o in others))) >= RETURN_WORDS


def interleave(name: str, half: str, units: Sequence[_Unit], start: datetime, *, seed: str,
               stay: float = 0.55) -> FollowupSession:
    """One dev session over ``units`` (see the module doc), with a schedule seeded by ``seed``."""
    rng = random.Random(seed)
    turns: list[FollowupTurn] = []
    current: _Unit | None = None
    started: list[_Unit] = []
    while True:
        options: list[tuple[_Unit, str]] = []
        if current is not None and current.left():
            options.append((current, "stay"))
        fresh = [u for u in units if u not in started and u.left()]
        back = [u for u in started if u is not current and u.left() and _points(u, [o for o in started if o is not u])]
        moves = [(u, "new") for u in fresh[:1]] + [(u, "return") for u in back]
        if not options and not moves:
            break
        if options and (not moves or rng.random() < stay):
            unit, kind = options[0]
        else:
            unit, kind = rng.choice(moves)
        if unit not in started:
            started.append(unit)
        mid, text, answer = unit.exchanges[unit.next]
        unit.next += 1
        unit.words |= content_words(text) | content_words(answer)
        at = (start + timedelta(seconds=45 * len(turns))).strftime("%Y-%m-%dT%H:%M:%S")
        turns.append(FollowupTurn(id=mid, text=text, answer=answer, conversation=unit.name, kind=kind, at=at))
        current = unit
    return FollowupSession(id=name, half=half, turns=tuple(turns))


def make_sessions(locomo_dir: Path, *, exchanges: int = 6, seed: int = 0) -> list[FollowupSession]:
    """The dev sessions of ``locomo_dir`` (LoCoMo's layout): session ``D<i>`` of every conversation
    interleaved, for each ``i`` every conversation has; half "A" for odd ``i``, "B" for even."""
    units = load_units(Path(locomo_dir), exchanges)
    by_conversation: dict[str, dict[int, str]] = {}
    for name in units:
        conversation, _, number = name.partition("/D")
        by_conversation.setdefault(conversation, {})[int(number)] = name
    common = sorted(set.intersection(*(set(v) for v in by_conversation.values()))) if by_conversation else []
    out = []
    for i in common:
        chosen = [_Unit(names[i], list(units[names[i]])) for names in by_conversation.values() if units[names[i]]]
        start = datetime(2024, 1, 1, 9) + timedelta(days=i)
        out.append(interleave(f"followups-{i:02d}", "A" if i % 2 else "B", chosen, start, seed=f"{seed}:{i}"))
    return out


def write_sessions(sessions: Sequence[FollowupSession], out_dir: Path) -> Path:
    """Write ``sessions.jsonl`` (one session a line) into ``out_dir`` (keep it outside the
    repository: the text is LoCoMo's, CC BY-NC 4.0); return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "sessions.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for session in sessions:
            handle.write(json.dumps(asdict(session), ensure_ascii=False) + "\n")
    return path


def read_sessions(path: Path) -> list[FollowupSession]:
    """The sessions of a ``sessions.jsonl`` written by ``write_sessions``."""
    out = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rec = json.loads(line)
                out.append(FollowupSession(id=rec["id"], half=rec["half"],
                                           turns=tuple(FollowupTurn(**t) for t in rec["turns"])))
    return out
