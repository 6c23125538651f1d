"""The topic index (seed 000 §7): canonical topics with aliases, auditable merges, topic edges.

Updated incrementally: ``observe`` reads one new message and returns what changed (new topics,
aliases, mentions); nothing already indexed is read again.

- A topic starts from a name-like term of a message: a capitalised name, an identifier with
  digits ("k8s", "py311"), a path. A plain lower-case word joins an existing topic when it is
  one of its aliases under the rules below, never starts one.
- Aliases, each recorded with the rule that admitted it: ``case`` ("kubernetes" / "Kubernetes"),
  ``inflection`` (same light stem: "Dockerfiles" / "Dockerfile"), ``numeronym`` ("k8s" = k + 8
  letters + s: "kubernetes"), ``similar names (0.93)`` (the embeddings of the two names, when the
  caller gives them to ``name_vectors``, closer than ``ALIAS_SIMILARITY``: "NYC" / "New-York",
  "Postgres" / "PostgreSQL"; never two names whose digits differ, "py311" / "py312"). A merge of a new term into a topic is a log record with
  its reason; ``split`` takes an alias out again into a topic of its own, moving its mentions
  (also logged): every merge is reversible.
- Topic–message edges (``mentions``) carry the term and rule that made them; topic–topic edges
  are co-occurrence counts within a message.
- ``search`` is the ``topic`` recall channel: the messages that mention the query's topics,
  rarer topics weighing more; a topic in more than ``COMMON_SHARE`` of the messages (the two
  people of a chat) says nothing about a question and is left out.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

import numpy as np

from app.core.memory.vectors import VectorRows
from app.core.text.words import STOPWORDS, TOPIC_TERMS, TOPIC_WORDS, stem

ALIAS_SIMILARITY = 0.89  # embedding cosine of two names above which they are one topic
COMMON_SHARE = 0.05  # a topic mentioned in more than this share of the indexed messages ...
COMMON_MIN = 20  # ... (and in more than this many) is too common to recall by
COOCCUR_MOST = 32  # a message's topics counted for co-occurrence (a pasted list of names is not n² pairs)
_NAME = re.compile(r"[\w./-]*[A-Za-z][\w./-]*")
_NUMERONYM = re.compile(r"^([a-z])(\d{1,2})([a-z])$")
_CAPITAL_START = re.compile(r"(?:^|[.!?]\s+|\n)([A-Z][a-z]+)\b")

_DIGITS = re.compile(r"\d+")


def topic_key(term: str) -> str:
    """The key two spellings share when they differ only in case or inflection."""
    return stem(term.strip("./-_").lower())


def new_topic_id(name: str, at: str = "") -> str:
    """A topic's id: the same for every spelling that is one topic by case or inflection
    (``topic_key``), so two processes that start the same topic at once write one topic, not two;
    ``at`` sets apart a topic that a split makes (its name already has a topic)."""
    return "topic-" + hashlib.sha1(f"{topic_key(name)}\x1f{at}".encode()).hexdigest()[:12]


def _shape(term: str) -> tuple[str, int, str] | None:
    """(first letter, letters between, last letter) of a numeronym ("k8s") or of a word it may
    stand for (alphabetic, 5+ letters: "kubernetes"); None for any other term. Two terms one of
    which abbreviates the other (``numeronym_of``) have the same shape."""
    low = term.lower()
    m = _NUMERONYM.match(low)
    if m is not None:
        return m.group(1), int(m.group(2)), m.group(3)
    if low.isalpha() and len(low) >= 5:
        return low[0], len(low) - 2, low[-1]
    return None


def numeronym_of(short: str, word: str) -> bool:
    """``short`` abbreviates ``word`` as a numeronym: first letter, count of letters between, last."""
    m = _NUMERONYM.match(short.lower())
    w = word.lower()
    if m is None or not w.isalpha() or len(w) < 5:
        return False
    return w[0] == m.group(1) and w[-1] == m.group(3) and len(w) - 2 == int(m.group(2))


@dataclass(slots=True)
class Topic:
    topic_id: str
    name: str
    aliases: dict[str, str] = field(default_factory=dict)  # surface form → the rule that admitted it
    created_at: str = ""


@dataclass(frozen=True, slots=True)
class Mention:
    topic_id: str
    session_id: str
    message_id: str
    term: str
    rule: str


@dataclass(slots=True)
class TopicChange:
    """What one ``observe`` added: new topics, aliases added to topics, mentions, log records."""

    topics: list[Topic] = field(default_factory=list)
    updated: list[Topic] = field(default_factory=list)
    mentions: list[Mention] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)


def name_terms(text: str) -> list[str]:
    """Name-like terms: capitalised words (not a sentence's first word), identifiers with digits, paths."""
    starts = {m.start(1) for m in _CAPITAL_START.finditer(text)}
    out: dict[str, None] = {}
    for m in _NAME.finditer(text):
        word = m.group(0).strip("./-_")
        if len(word) < 2 or word.lower() in STOPWORDS:
            continue
        capital = word[0].isupper() and m.start() not in starts and m.start() != 0
        if capital or any(c.isdigit() for c in word) and any(c.isalpha() for c in word) or "/" in word:
            out.setdefault(word, None)
    return list(out)


class NameVectors:
    """Embeddings of names, given by the caller, and the topics' names placed among them (the
    rows a new name is compared with)."""

    def __init__(self) -> None:
        self.known: dict[str, np.ndarray] = {}
        self.rows = VectorRows()  # by topic id: the vector of its name

    def add(self, names: Iterable[str], vectors: Iterable[np.ndarray]) -> None:
        for name, vector in zip(names, vectors):
            self.known[name] = np.asarray(vector, dtype=np.float32)

    def missing(self, names: Iterable[str]) -> list[str]:
        return [n for n in dict.fromkeys(names) if n not in self.known]

    def place(self, topic_id: str, name: str) -> None:
        """``topic_id``'s name joins the rows (when its vector is known)."""
        if name in self.known:
            self.rows.add(topic_id, self.known[name])

    def nearest(self, name: str) -> tuple[str, float] | None:
        """The topic whose name is closest to ``name`` and the cosine, or None."""
        vector = self.known.get(name)
        best = self.rows.top(vector, 1) if vector is not None else []
        return best[0] if best else None


class TopicIndex:
    """Topics, their aliases and mentions, the merge/split log; incremental and pure."""

    def __init__(self) -> None:
        self.topics: dict[str, Topic] = {}
        self.mentions: list[Mention] = []
        self.log: list[dict] = []
        self.cooccur: Counter[tuple[str, str]] = Counter()
        self.name_vectors = NameVectors()
        self._keys: dict[str, str] = {}  # topic_key of every alias → topic id
        self._shapes: dict[tuple[str, int, str], set[str]] = {}  # numeronym shape of an alias → topic ids
        self._rank: dict[str, int] = {}  # topic id → its place in ``topics`` (the first match wins)
        self._by_topic: dict[str, list[Mention]] = {}
        self._seen: set[str] = set()  # message ids already observed
        self._per_session: Counter[str] = Counter()  # messages observed, by session

    # ------------------------------------------------------------------ loading

    def load(self, topics: Iterable[Topic], mentions: Iterable[Mention], log: Iterable[dict]) -> None:
        for topic in topics:
            self._put(topic)
        for mention in mentions:
            self._mention(mention)
        self.log.extend(log)
        by_message: dict[str, set[str]] = {}
        for mention in self.mentions:
            by_message.setdefault(mention.message_id, set()).add(mention.topic_id)
        for ids in by_message.values():
            self._count_pairs(ids)

    def _put(self, topic: Topic) -> None:
        self.topics[topic.topic_id] = topic
        self._rank.setdefault(topic.topic_id, len(self._rank))
        for alias in topic.aliases:
            self._keys[topic_key(alias)] = topic.topic_id
            self._shaped(alias, topic.topic_id)

    def _shaped(self, alias: str, topic_id: str) -> None:
        shape = _shape(alias)
        if shape is not None:
            self._shapes.setdefault(shape, set()).add(topic_id)

    def _mention(self, mention: Mention) -> None:
        self.mentions.append(mention)
        self._by_topic.setdefault(mention.topic_id, []).append(mention)
        self._see(mention.session_id, mention.message_id)

    def _see(self, session_id: str, message_id: str) -> None:
        if message_id not in self._seen:
            self._seen.add(message_id)
            self._per_session[session_id] += 1

    def _count_pairs(self, ids: Collection[str]) -> None:
        ordered = sorted(ids)[:COOCCUR_MOST]
        for i, a in enumerate(ordered):
            for b in ordered[i + 1:]:
                self.cooccur[(a, b)] += 1

    # ------------------------------------------------------------------ resolving terms

    def resolve(self, term: str) -> tuple[str | None, str]:
        """(topic id, rule) of the topic ``term`` belongs to, or (None, "")."""
        topic_id = self._keys.get(topic_key(term))
        if topic_id is not None:
            topic = self.topics[topic_id]
            if term in topic.aliases:
                return topic_id, topic.aliases[term]
            exact = any(a.lower() == term.lower() for a in topic.aliases)
            return topic_id, "case" if exact else "inflection"
        shape = _shape(term)  # a numeronym and its word share a shape: only those topics are compared
        for topic_id in sorted(self._shapes.get(shape, ()) if shape else (), key=self._rank.__getitem__):
            if any(numeronym_of(term, a) or numeronym_of(a, term) for a in self.topics[topic_id].aliases):
                return topic_id, "numeronym"
        return None, ""

    def unplaced_names(self) -> list[str]:
        """Names of topics not yet in the name matrix (their vectors are wanted)."""
        return [t.name for i, t in self.topics.items() if i not in self.name_vectors.rows]

    def place_names(self) -> None:
        """Put the topics whose name vectors are now known into the name matrix."""
        for topic_id, topic in self.topics.items():
            if topic_id not in self.name_vectors.rows:
                self.name_vectors.place(topic_id, topic.name)

    def _similar(self, term: str) -> tuple[str | None, str]:
        """The topic whose name's embedding is within ``ALIAS_SIMILARITY`` of ``term``'s (never
        across different digits: versions and numbers are different things)."""
        near = self.name_vectors.nearest(term)
        if near is None or near[1] < ALIAS_SIMILARITY:
            return None, ""
        topic_id, score = near
        if _DIGITS.findall(term) != _DIGITS.findall(self.topics[topic_id].name):
            return None, ""
        return topic_id, f"similar names ({score:.2f})"

    # ------------------------------------------------------------------ updating

    def observe(self, session_id: str, message_id: str, text: str, at: str) -> TopicChange:
        """Index one new message (a message seen before changes nothing)."""
        change = TopicChange()
        if message_id in self._seen:
            return change
        names = name_terms(text)
        words = [w for w in TOPIC_WORDS.words(text) if w.lower() not in STOPWORDS]
        found: dict[str, tuple[str, str]] = {}  # topic id → (term, rule)
        for term in dict.fromkeys([*names, *words]):
            topic_id, rule = self.resolve(term)
            if topic_id is None and term in names:
                topic_id, rule = self._similar(term)
            if topic_id is None and term in names:
                topic = Topic(new_topic_id(term), term, {term: "first seen"}, at)
                self._put(topic)
                self.name_vectors.place(topic.topic_id, term)
                change.topics.append(topic)
                self._record(change, {"op": "create", "topic_id": topic.topic_id, "name": term, "at": at,
                                      "message_id": message_id})
                topic_id, rule = topic.topic_id, "name"
            if topic_id is None:
                continue
            self._admit(change, topic_id, term, rule, message_id, at)
            found.setdefault(topic_id, (term, rule))
        for topic_id, (term, rule) in found.items():
            mention = Mention(topic_id, session_id, message_id, term, rule)
            self._mention(mention)
            change.mentions.append(mention)
        self._count_pairs(found)
        self._see(session_id, message_id)
        return change

    def _admit(self, change: TopicChange, topic_id: str, term: str, rule: str, message_id: str, at: str) -> None:
        """A new surface form of a topic becomes an alias; one from another rule than case or
        inflection is a merge, logged with its reason."""
        topic = self.topics[topic_id]
        if term in topic.aliases or rule == "name":
            return
        topic.aliases[term] = rule
        self._keys.setdefault(topic_key(term), topic_id)
        self._shaped(term, topic_id)
        if numeronym_of(topic.name, term):  # the full word names the topic better than its numeronym
            topic.name = term
        change.updated.append(topic)
        self._record(change, {"op": "merge", "topic_id": topic_id, "alias": term, "rule": rule, "at": at,
                              "message_id": message_id})

    def _record(self, change: TopicChange, entry: dict) -> None:
        self.log.append(entry)
        change.log.append(entry)

    def split(self, topic_id: str, alias: str, at: str) -> TopicChange:
        """Undo a merge: ``alias`` leaves the topic for a topic of its own, with its mentions."""
        change = TopicChange()
        topic = self.topics[topic_id]
        if alias not in topic.aliases or len(topic.aliases) < 2:
            raise ValueError(f"{alias!r} is not an alias that can leave topic {topic.name!r}")
        del topic.aliases[alias]
        if topic.name == alias:
            topic.name = next(iter(topic.aliases))
        new = Topic(new_topic_id(f"{alias} split from {topic_id}", at), alias, {alias: "split"}, at)
        self._keys = {k: v for k, v in self._keys.items() if v != topic_id}
        self._put(topic)
        self._put(new)
        self.name_vectors.place(new.topic_id, alias)
        self.name_vectors.place(topic_id, topic.name)  # its name may have changed
        moved = [m for m in self._by_topic.get(topic_id, []) if m.term == alias]
        self._by_topic[topic_id] = [m for m in self._by_topic.get(topic_id, []) if m.term != alias]
        self.mentions = [m for m in self.mentions if not (m.topic_id == topic_id and m.term == alias)]
        for m in moved:
            mention = Mention(new.topic_id, m.session_id, m.message_id, m.term, "split")
            self._mention(mention)
            change.mentions.append(mention)
        change.topics.append(new)
        change.updated.append(topic)
        self._record(change, {"op": "split", "topic_id": topic_id, "alias": alias, "into": new.topic_id, "at": at})
        return change

    # ------------------------------------------------------------------ reading

    def messages_of(self, topic_id: str) -> list[Mention]:
        return list(self._by_topic.get(topic_id, []))

    def session_topics(self, session_id: str, *, least: int, most: int) -> dict[str, list[str]]:
        """The session's main topics (at most ``most``, each mentioned by at least ``least`` of
        its messages and not by half of them or more, like the people of a chat): topic id → message ids."""
        total = self._per_session[session_id]
        counts: dict[str, list[str]] = {}
        for topic_id, mentions in self._by_topic.items():
            ids = list(dict.fromkeys(m.message_id for m in mentions if m.session_id == session_id))
            if least <= len(ids) < max(least + 1, total / 2):
                counts[topic_id] = ids
        ranked = sorted(counts, key=lambda t: (-len(counts[t]), t))[:most]
        return {t: counts[t] for t in ranked}

    def related(self, topic_id: str, k: int = 5) -> list[tuple[str, int]]:
        """Topics that co-occur with ``topic_id`` in a message, most often first (id, count)."""
        pairs = [(b if a == topic_id else a, n) for (a, b), n in self.cooccur.items() if topic_id in (a, b)]
        return sorted(pairs, key=lambda p: (-p[1], p[0]))[:k]

    def search(self, query: str, k: int, *, sessions: Collection[str] | None = None,
               exclude: Collection[str] = ()) -> list[tuple[str, float]]:
        """The topic channel: messages mentioning the query's topics (rarer topics weigh more),
        within ``sessions`` when given; best first, then latest. Rarity is counted among the
        messages searched: a topic most of them mention is left out."""
        if k <= 0 or not self.topics:
            return []
        wanted = {t for t, _ in (self.resolve(w) for w in TOPIC_TERMS.words(query)) if t is not None}
        total = max(1, len(self._seen) if sessions is None else sum(self._per_session[s] for s in sessions))
        scores: dict[str, float] = {}
        order: dict[str, int] = {}
        for topic_id in wanted:
            mentions = [m for m in self._by_topic.get(topic_id, []) if sessions is None or m.session_id in sessions]
            if len(mentions) > max(COMMON_MIN, COMMON_SHARE * total):  # the people of a chat pick nothing out
                continue
            weight = math.log(1 + total / max(1, len(mentions)))
            for m in mentions:
                if m.message_id not in exclude:
                    scores[m.message_id] = scores.get(m.message_id, 0.0) + weight
                    order.setdefault(m.message_id, len(order))
        ranked = sorted(scores, key=lambda i: (-scores[i], -order[i]))
        return [(i, round(scores[i], 6)) for i in ranked[:k]]
