"""Text cues for intent inference: cue tables, sentence-form analysis and entity extraction.

``analyse_text`` reads what the text alone says (the ``rules`` signal's input): speech-act and
task-type cue strengths, control/amend/status/follow-up flags, urgency, risk words and time
hints, each with its evidence span; it reads them in a fixed order, one helper per kind of cue.
The module also holds the regular expressions for acceptance criteria, constraints and
prohibitions, the entity extractor (which skips the cue vocabulary), goal clean-up, and the two
small readers of the context: which running task an input addresses and the goal of an
environment event. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.core.intent.dependence import read_dependence
from app.core.intent.model import EnvEventRef, EvidenceSpan, RunningTask, Urgency
from app.core.text.words import (
    STOPWORDS,
    content_stems,
    dedup_texts,
    negated_stems,
    stem,
    stems_of,
    tokenize,
    tokenize_tail,
)

# --------------------------------------------------------------------------- cue tables


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_PREFIX_RE = _rx(r"^(?:(?:hey|hi|ok|okay|so|now|then|just|also|and|alright)[,]?\s+)*"
                 r"(?P<req>please|pls|kindly|can you|could you|would you|will you|can u|i need you to|"
                 r"i want you to|i'?d like you to|i would like you to|let'?s|go ahead and|help me(?: to)?)?"
                 r"[,]?\s*(?:please\s+)?")
_WANT_RE = _rx(r"^(?:i|we) (?:really )?(?:need|want|would like|'d like)\b")
_WH_RE = _rx(r"^(?:what|who|whom|whose|when|where|why|which|how)\b")
_AUX_RE = _rx(r"^(?:is|are|was|were|do|does|did|can|could|would|should|will|has|have|had|may|isn'?t|"
              r"aren'?t|don'?t|doesn'?t|didn'?t)\b")
_INFO_RE = _rx(r"\b(?:i wonder|do you know|any idea|tell me)\b")
_CONTROL_RE = _rx(r"^(?:(?:ok|okay|no|hey)[,!]?\s+)?(?P<c>stop|cancel|abort|halt|pause|wait|hold on|hang on|"
                  r"never ?mind|forget (?:it|that)|resume|continue|keep going|go on)\b")
_CONTROL_ACTION = {"stop": "stop", "halt": "stop", "abort": "stop", "cancel": "cancel", "nevermind": "cancel",
                   "never mind": "cancel", "forget it": "cancel", "forget that": "cancel", "pause": "pause",
                   "wait": "pause", "hold on": "pause", "hang on": "pause", "resume": "resume",
                   "continue": "resume", "keep going": "resume", "go on": "resume"}
_AMEND_RE = _rx(r"\b(?:while you'?re at it|while you are at it|in the meantime|meanwhile|"
                r"also (?:add|include|make sure)|and also)\b")
_STATUS_RE = _rx(r"\b(?:status|progress|how far|how long (?:until|till|before|left|more|will (?:it|you|that|this))|"
                 r"how much longer|done yet|finished yet|eta|how'?s it going|"
                 r"how is it going|are you done|still running|almost done)\b")
# Words by which a question points back at work in progress without naming it ("does it cover
# costs?", "what have you got so far?"): with a task running, such a question is about the task.
_REFERS_BACK_RE = _rx(r"\b(?:it|its|this|these|those|so far|yet|have you|did you|are you|were you|you've|your|"
                      r"the (?:task|job|work)|done|finished|ready|going)\b")
_FOLLOW_RE = _rx(r"^(?:and|but|also|what about|how about|same for|same with|then|what else|why not|"
                 r"the (?:first|second|third|last|next|other|previous) one|another one|more|again)\b")
_ACK_RE = _rx(r"^(?:thanks|thank you|thx|ok|okay|great|cool|got it|perfect|nice|sounds good)[.! ]*$")
_PRONOUN_RE = _rx(r"\b(?:it|that|this|them|those|these|one)\b")
_URGENT_RE = _rx(r"\b(?:urgent(?:ly)?|asap|immediately|right now|right away|as soon as possible|emergency|"
                 r"critical|hurry)\b|\bnow\s*!*\s*$|!{2,}")
_CALM_RE = _rx(r"\b(?:no rush|no hurry|whenever|when you (?:have|get) (?:time|a chance)|low priority|"
               r"at some point|eventually|not urgent)\b")
_RECENT_RE = _rx(r"\b(?:today|just now|recently|a (?:moment|minute|second) ago|earlier|this (?:morning|"
                 r"afternoon|evening)|last hour|latest)\b")
_PAST_RE = _rx(r"\b(?:yesterday|last (?:week|month|year|time|session)|\d+ (?:days|weeks|months|years) ago|"
               r"previously|back then|in (?:19|20)\d\d)\b")
ACCEPT_RE = _rx(r"\b(?:so that|such that|make sure(?: that)?|ensure(?: that)?|it (?:should|must|needs to)|"
                r"until|done when|acceptance:|success(?:ful)? (?:is|when))\s+(?P<x>[^.;!?]+)")
CONSTRAINT_RE = _rx(r"\b(?P<x>(?:without|only (?:use|using|in|with|from)|using|keep (?:it|them)?|"
                    r"in (?:under|less than|at most|no more than)|(?:at most|no more than|under|less than|"
                    r"max(?:imum)?|within) \d+|in \d+|by (?:tomorrow|today|tonight|monday|tuesday|wednesday|"
                    r"thursday|friday|saturday|sunday|end of (?:day|week))|in (?:python|javascript|typescript|"
                    r"rust|go|java|markdown|json|yaml|csv|english|french|german|spanish|chinese|japanese|"
                    r"bullet points|a table))\b[^.;!?,]*)")
PROHIB_RE = _rx(r"(?:^|[,.;:!]\s*|\b(?:and|but|please|just|also)\s+)(?:don'?t|do not|never|avoid|must not)"
                r"\s+(?P<x>[^.;,!?]+)")
_PHRASES: tuple[tuple[re.Pattern[str], str, float], ...] = (
    (_rx(r"\bwhat(?:'s| is) wrong\b|\bwent wrong\b|\bnot working\b|\bdoesn'?t work\b|\bstack ?trace\b"),
     "diagnostic", 1.2),
    (_rx(r"\bwhy\b.*\b(?:error|fail\w*|crash\w*|broken|wrong|slow|exception|bug)"), "diagnostic", 1.0),
    (_rx(r"\b(?:a|the|my|our) (?:plan|roadmap|schedule|timeline|strategy|checklist|agenda)\b"), "planning", 1.0),
    (_rx(r"\b(?:next steps|how should (?:i|we)|what should (?:i|we) do|break (?:it|this|the \w+) down)\b"),
     "planning", 1.0),
    (_rx(r"\b(?:look up|what did|when did|where (?:is|are|did)|who (?:said|was|is))\b"), "retrieval", 0.8),
)
_RISK_STEMS = frozenset("delet remov eras wip drop truncat overwrit purg reset deploy publish pay payment "
                        "purchas buy transfer send sent submit rm uninstall kill shutdown".split())


def _words_table(spec: str) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for entry in spec.split():
        word, labels = entry.split("=")
        for part in labels.split(","):
            label, w = part.split(":")
            table.setdefault(stem(word), {})[label] = float(w)
    return table


_TASK_WORDS = _words_table(
    "find=retrieval:1 search=retrieval:1 look=retrieval:.6 list=retrieval:.8 show=retrieval:.8 "
    "fetch=retrieval:.8 retrieve=retrieval:1 recall=retrieval:1 remind=retrieval:1 locate=retrieval:1 "
    "remember=retrieval:.8 mentioned=retrieval:.8 said=retrieval:.8 told=retrieval:.8 where=retrieval:.5 "
    "who=retrieval:.6 when=retrieval:.5 which=retrieval:.4 what=retrieval:.4 tell=retrieval:.6 "
    "explain=retrieval:.6,generation:.3 describe=retrieval:.5,generation:.3 define=retrieval:.8 "
    "compare=retrieval:.5 check=retrieval:.5,diagnostic:.3 "
    "write=generation:1 draft=generation:1 compose=generation:1 generate=generation:1 create=generation:.8 "
    "make=generation:.5 summarize=generation:1 summarise=generation:1 translate=generation:1 "
    "outline=generation:.6,planning:.3 brainstorm=generation:.8 suggest=generation:.6 propose=generation:.6 "
    "rephrase=generation:1 paraphrase=generation:1 poem=generation:.6 essay=generation:.6 story=generation:.6 "
    "fix=change:1,diagnostic:.3 change=change:1 edit=change:1 modify=change:1 update=change:1 "
    "refactor=change:1 rename=change:1 replace=change:1 remove=change:1 delete=change:1 add=change:.7 "
    "implement=change:1 move=change:.8 convert=change:.8 rewrite=change:.8,generation:.4 patch=change:1 "
    "install=change:1 deploy=change:1 configure=change:1 clean=change:.8 merge=change:.8 undo=change:1 "
    "restore=change:1 send=change:.6 publish=change:.6 apply=change:.8 migrate=change:1 upgrade=change:1 "
    "commit=change:.8 insert=change:1 append=change:.8 tweak=change:1 adjust=change:1 correct=change:.8 "
    "improve=change:.6 optimize=change:.6 build=change:.6,generation:.4 "
    "debug=diagnostic:1 diagnose=diagnostic:1 investigate=diagnostic:1 troubleshoot=diagnostic:1 "
    "error=diagnostic:.8 exception=diagnostic:.8 traceback=diagnostic:1 crash=diagnostic:1 "
    "fail=diagnostic:.8 failing=diagnostic:.8 failure=diagnostic:.8 broken=diagnostic:.8 bug=diagnostic:.5 "
    "log=diagnostic:.4 logs=diagnostic:.4 "
    "wrong=diagnostic:.5 issue=diagnostic:.4 slow=diagnostic:.5 leak=diagnostic:.6 timeout=diagnostic:.6 "
    "why=diagnostic:.4 "
    "plan=planning:1 schedule=planning:1 roadmap=planning:1 prioritize=planning:1 prioritise=planning:1 "
    "organize=planning:.8 organise=planning:.8 strategy=planning:.8 milestone=planning:1 "
    "timeline=planning:.8 agenda=planning:.8 steps=planning:.5 todo=planning:.8 checklist=planning:.6"
)
_NON_VERBS = frozenset(stem(w) for w in (
    "where who when which what mentioned said told poem essay story error exception traceback failing failure "
    "broken bug log logs wrong issue slow leak timeout why strategy milestone timeline agenda steps todo "
    "checklist roadmap").split())
_VERBS = frozenset(_TASK_WORDS) - _NON_VERBS
_CLAUSE_VERB_RE = _rx(r"(?:^|[.,;:!?]\s+|\b(?:and|then)\s+)(?:please\s+|just\s+|also\s+)?(?P<v>[a-z]+)\b")
_INTERJECTIONS = frozenset("hmm hm hmmm huh uh um umm er eh ah oh meh idk lol well yeah yes yep no nope sure".split())
_INFO_VERBS = frozenset(stem(w) for w in "tell explain describe show remind define".split())
_FILLERS = frozenset("hey hi ok okay so now then just also and alright please".split())

# --------------------------------------------------------------------------- text analysis


@dataclass
class TextCues:
    """What the text alone says: raw cue strength per label, flags, spans (for audit and tests)."""

    body: str = ""  # the text less a request formula ("please", "can you")
    body_words: tuple[str, ...] = ()  # ``tokenize(body)``, read off the text's own split
    body_stems: tuple[str, ...] = ()  # ``content_stems(body)``
    mode: dict[str, float] = field(default_factory=dict)
    task: dict[str, float] = field(default_factory=dict)
    spans: list[EvidenceSpan] = field(default_factory=list)
    question: bool = False
    control: str | None = None
    amend: bool = False
    status_query: bool = False
    refers_back: bool = False
    follow_up: bool = False
    dependence: float = 0.0  # how much it leans on what came before (``intent.dependence``)
    topic_shift: float = 0.0  # how plainly it opens a new topic
    ack: bool = False
    vague: bool = False
    urgency: Urgency = Urgency.NORMAL
    risk_words: list[str] = field(default_factory=list)
    time_hints: list[str] = field(default_factory=list)

    def add(self, table: dict[str, float], label: str, strength: float, span: str, fld: str) -> None:
        table[label] = table.get(label, 0.0) + strength
        ev = EvidenceSpan(span=span.strip(), field=fld)
        if ev.span and ev not in self.spans:
            self.spans.append(ev)


def analyse_text(text: str) -> TextCues:
    """Read cue words and sentence form from ``text`` (no context): the rules signal's input.

    Returns the cues in a fixed order of reading: control words, question form, request form,
    task-type words, dialogue flags (ack, follow-up, vague), how much it depends on what came
    before and whether it opens a new topic, urgency, risk words, time hints.
    """
    t = re.sub(r"\s+", " ", text.replace("\u2019", "'")).strip()
    c = TextCues()
    if not t:
        return c
    prefix = _PREFIX_RE.match(t)
    req = prefix.group("req") if prefix else None
    c.body = t[prefix.end():].strip() if prefix else t
    body_words = c.body_words = tokenize_tail(t, len(t) - len(c.body))  # the body ends the (stripped) text
    c.body_stems = tuple(stems_of(body_words))
    first = stem(body_words[0]) if body_words else ""
    _control_cues(t, c)
    head_is_task = first in _VERBS and first not in _INFO_VERBS and not c.control
    _question_cues(t, c, req, head_is_task)
    _request_cues(t, c, req, body_words, head_is_task)
    negated = negated_stems(t)
    _task_type_cues(t, c, body_words, negated)
    _dialogue_cues(t, c)
    place = read_dependence(t)
    c.dependence, c.topic_shift = place.score, place.topic_shift
    _urgency_cues(t, c)
    for word in tokenize(t):
        if stem(word) in _RISK_STEMS and stem(word) not in negated and word not in c.risk_words:
            c.risk_words.append(word)
            c.spans.append(EvidenceSpan(span=word, field="risk"))
    for pattern, hint in ((_RECENT_RE, "recent"), (_PAST_RE, "past")):
        for m in pattern.finditer(t):
            c.time_hints.append(f"time:{hint}:{m.group(0).lower()}")
    return c


def _control_cues(t: str, c: TextCues) -> None:
    """Set the control word (stop, pause, ...), an amendment and a status question, with interrupt cues."""
    if (m := _CONTROL_RE.match(t)) is not None:
        c.control = _CONTROL_ACTION.get(m.group("c").lower(), "stop")
        c.add(c.mode, "interrupt", 2.0, m.group(0), "mode")
    if (m := _AMEND_RE.search(t)) is not None:
        c.amend = True
        c.add(c.mode, "interrupt", 1.0, m.group(0), "mode")
    if (m := _STATUS_RE.search(t)) is not None:
        c.status_query = True  # only the structure signal knows whether a task is running
        c.spans.append(EvidenceSpan(span=m.group(0), field="mode"))
    c.refers_back = _REFERS_BACK_RE.search(c.body) is not None


def _question_cues(t: str, c: TextCues, req: str | None, head_is_task: bool) -> None:
    """Set ``c.question`` and add qa cues from the question mark, a wh-word, an auxiliary or "I wonder"."""
    polite_request = bool(req) and head_is_task  # "can you fix X?": the '?' is politeness
    if "?" in t and not polite_request:
        c.question = True
        c.add(c.mode, "qa", 1.0 if t.endswith("?") else 0.6, "?", "mode")
    if (m := _WH_RE.match(c.body)) is not None and not req:
        c.question = True
        c.add(c.mode, "qa", 1.0, m.group(0), "mode")
        if m.group(0).lower() not in ("why", "how"):  # "what changed" asks to look something up
            c.add(c.task, "retrieval", 0.8, m.group(0), "task_type")
    elif (m := _AUX_RE.match(t)) is not None and not req and not c.control:
        c.question = True
        c.add(c.mode, "qa", 0.8, m.group(0), "mode")
    if (m := _INFO_RE.search(t)) is not None:
        c.add(c.mode, "qa", 0.8, m.group(0), "mode")


def _request_cues(t: str, c: TextCues, req: str | None, body_words: Sequence[str], head_is_task: bool) -> None:
    """Add task cues from an imperative head verb, a request phrase, later clauses and "I want";
    qa cues from an information verb ("explain") or a plain statement."""
    first = stem(body_words[0]) if body_words else ""
    if first in _INFO_VERBS:
        c.add(c.mode, "qa", 1.2, body_words[0], "mode")
    elif head_is_task and not _WH_RE.match(c.body):
        c.add(c.mode, "task", 1.5, body_words[0], "mode")
        if req:
            c.add(c.mode, "task", 1.0, req, "mode")
    elif req and not c.question:
        c.add(c.mode, "task", 0.8, req, "mode")
    for clause in _CLAUSE_VERB_RE.finditer(t):  # imperatives that open a later clause: "..., check the logs"
        verb = stem(clause.group("v").lower())
        if clause.start("v") > 0 and verb in _VERBS and verb not in _INFO_VERBS and verb != first:
            c.add(c.mode, "task", 1.0, clause.group("v"), "mode")
    if (want := _WANT_RE.match(t)) is not None and not c.question:
        c.add(c.mode, "task", 1.0, want.group(0), "mode")
    if not c.mode and c.body_stems:  # a plain statement ("the deadline moved"): inform
        c.add(c.mode, "qa", 0.8, c.body[:60], "mode")


def _task_type_cues(t: str, c: TextCues, body_words: Sequence[str], negated: set[str]) -> None:
    """Add task-type cues: every known word counts (negated ones less); the head verb's main label
    counts double; known phrases ("what went wrong", "next steps") add theirs."""
    tokens = tokenize(t)
    head_index = len(tokens) - len(body_words)
    for i, word in enumerate(tokens):
        s = stem(word)
        table = _TASK_WORDS.get(s, {})
        main = next(iter(table), "")
        for label, w in table.items():
            boost = 2.0 if (i == head_index and label == main) else 1.0
            c.add(c.task, label, w * boost * (0.3 if s in negated else 1.0), word, "task_type")
    for pattern, label, w in _PHRASES:
        if (m := pattern.search(t)) is not None:
            c.add(c.task, label, w, m.group(0), "task_type")


def _dialogue_cues(t: str, c: TextCues) -> None:
    """Set the acknowledgement, follow-up and vague flags; an ack is qa, a vague input is clarify."""
    stems = [x for x in c.body_stems if x not in _INTERJECTIONS]
    c.ack = bool(_ACK_RE.match(t))
    if c.ack:
        c.add(c.mode, "qa", 1.5, t, "mode")
    c.follow_up = bool(_FOLLOW_RE.match(t)) and len(tokenize(t)) <= 7
    pronoun_only = len(stems) <= 1 and bool(_PRONOUN_RE.search(c.body)) and len(c.body_words) <= 4
    if not c.ack and not c.control and (not stems or pronoun_only) and not extract_entities(t):
        c.vague = True
        c.follow_up = c.follow_up or pronoun_only
        c.add(c.mode, "clarify", 1.5 if not stems else 0.8, t, "mode")


def _urgency_cues(t: str, c: TextCues) -> None:
    """Set the urgency: low on calm words, high on urgent words or a stop/cancel/pause control."""
    if (m := _CALM_RE.search(t)) is not None:
        c.urgency = Urgency.LOW
        c.spans.append(EvidenceSpan(span=m.group(0), field="urgency"))
    elif (m := _URGENT_RE.search(t)) is not None or c.control in ("stop", "cancel", "pause"):
        c.urgency = Urgency.HIGH
        c.spans.append(EvidenceSpan(span=m.group(0) if m else str(c.control), field="urgency"))


# --------------------------------------------------------------------------- entities and goal

_ENTITY_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"https?://\S+[\w/]"),
    re.compile(r"\"([^\"]{1,80})\"|\u201c([^\u201d]{1,80})\u201d|`([^`]{1,80})`|"
               r"(?:(?<=\s)|^)'([^']{2,80})'(?=[\s.,;:!?]|$)"),
    re.compile(r"(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)*|\b[\w\-]+(?:/[\w\-]+)*\.(?:py|js|ts|tsx|md|txt|json|yaml|yml|"
               r"toml|csv|html|css|ini|cfg|log|sql|rs|go|java|c|cpp|h|sh|pdf|docx?|xlsx?|pptx?|png|jpe?g)\b"),
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|"
               r"Sept|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?(?:,? \d{4})?\b|\b\d{1,2}(?:st|nd|rd|th)? (?:of )?"
               r"(?:January|February|March|April|May|June|July|August|September|October|November|December)\b"),
    re.compile(r"[#@][\w\-]+|\b[a-z]+_[a-z0-9_]+\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b|"
               r"\b[A-Z]{2,}\d*\b|\b[A-Z]\d+[A-Z\d]*\b"),
    re.compile(r"\b[A-Z][a-z]+(?:[ \-][A-Z][a-z]+)*\b"),
    re.compile(r"\b\d+(?:[.,:]\d+)*%?"),
)
_SENTENCE_OPENERS = frozenset("never always don't maybe perhaps thanks sorry actually urgent wait stop while after "
                               "before since because although once until still however first next finally ask let "
                               "give take call see go try keep help put bring open close read run start test note "
                               "hello dear".split())
_NOT_NAMES = frozenset("I OK ASAP ETA FYI URGENT IMPORTANT NOTE TODO PLEASE NOW BTW IMO".split())


def extract_entities(text: str, cap: int = 12) -> list[str]:
    """Return names, paths, quoted terms, identifiers, capitalised words, dates and numbers, in order."""
    taken: list[tuple[int, int, str]] = []
    common = STOPWORDS | set(_TASK_WORDS) | _FILLERS | _INTERJECTIONS | _SENTENCE_OPENERS
    for pattern in _ENTITY_PATTERNS:
        for m in pattern.finditer(text):
            start, end = m.span()
            value = next((g for g in m.groups() if g), m.group(0)) if m.groups() else m.group(0)
            if pattern is _ENTITY_PATTERNS[5]:
                words = value.split(" ")
                while words and (words[0].lower() in common or stem(words[0].lower()) in common):
                    start += len(words[0]) + 1
                    words = words[1:]
                value = " ".join(words)
            value = value.strip(" .,;:!?")
            if not value or value in _NOT_NAMES or any(s < end and start < e for s, e, _ in taken):
                continue
            taken.append((start, end, value))
    return dedup_texts([v for _, _, v in sorted(taken)], cap)


def clean_goal(body: str) -> str:
    """Return ``body`` as a goal: leading fillers and a trailing "please" dropped, cut to 240 chars."""
    words = body.split(" ")
    while words and words[0].lower().strip(",") in _FILLERS:
        words = words[1:]
    goal = " ".join(words).strip().rstrip(".!;, ")
    goal = re.sub(r"[,\s]*please$", "", goal, flags=re.IGNORECASE)
    return goal[:240].rsplit(" ", 1)[0] if len(goal) > 240 else goal


# --------------------------------------------------------------------------- context readers

ENV_ALERT_RE = _rx(r"\b(?:error|alert|fail\w*|crash\w*|down|critical|exception)\b")
SAFE_SEND_RE = _rx(r"\b(?:send|email|mail)\s+(?:it\s+)?(?:to\s+)?me\b")


def target_task(text: str, running: Sequence[RunningTask], focus: str | None,
                head: str = "") -> tuple[RunningTask | None, bool, bool]:
    """Return (the task the input addresses, whether that is ambiguous, whether the text names a task).

    The head verb is left out of the name match: "write a poem" does not name "Write the report".
    """
    if not running:
        return None, False, False
    stems = set(content_stems(text)) - {head}
    overlaps = [len(stems & set(content_stems(t.name))) for t in running]
    named = max(overlaps) > 0
    for t in running:
        if focus is not None and t.task_id == focus:
            return t, False, named
    if len(running) == 1:
        return running[0], False, named
    best = max(overlaps)
    if best > 0 and overlaps.count(best) == 1:
        return running[overlaps.index(best)], False, named
    return None, True, named


def env_goal(events: Sequence[EnvEventRef]) -> str:
    """Return the goal of an environment-triggered turn: review the latest event(s); "" without events."""
    recent = list(events)[-3:]
    if not recent:
        return ""
    if len(events) == 1:
        e = recent[0]
        return f"Review the {e.kind} event: {e.title or e.uri}"
    return f"Review {len(events)} environment events: " + "; ".join(e.title or e.uri for e in recent)


def is_task_verb(word: str) -> bool:
    """Whether ``word`` is a verb that asks for work ("draft", "book", "compare"), as the task
    cues read it (a task's steps are told apart by theirs: ``app.core.tasks.steps``)."""
    return stem(word.lower()) in _VERBS
