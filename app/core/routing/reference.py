"""What a dependent input refers to: the conversation its words point to, else the latest one.

A follow-up leans on what came before (``app.core.intent.dependence``). Among the anchor
candidates, grouped by branch tree (a conversation), ``refer`` finds the one it continues: the
tree whose own words it repeats — content words said on that tree's recent chain and on no other
candidate tree's, a fair share of the input's own (``POINTING``) — and when none or several do, or
when it opens with a response token ("Thanks! …": it reacts to what was just said) and some of its
words are the latest conversation's, the tree of the most recent turn ("the one we were just
talking about"). The follow-up continues that tree's latest candidate node. ``Referent.asked``
names the question an input that opens with a statement replies to (the ``reply`` feature,
``answered``): the one of the conversation its words point to (a return names its topic); else,
when the latest answer asked the user something, the waiting question closest in meaning — the
latest unless another is clearly closer (``SAME_MEANING``). A yes/no question waits only for a
statement that takes it up (``takes_up``: a position on it, its auxiliary echoed, its words) or
names its conversation (a request for work takes it up too: it says what to do instead); when
the latest answer asked one and the input does none of that,
``Referent.ignored`` names that conversation: the input has left the exchange (the ``shift``
feature, ``routing.candidates``).

The other way round, ``unsaid_share`` tells how much of what a standalone input talks about a
conversation never mentioned ("What is the capital of Peru?" after a Kyoto trip): a new subject.

Pure: plain values in, plain values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.core.intent.dependence import OWN_LONG, asks, last_question, own_words, responds, takes_up
from app.core.session.state import SessionState
from app.core.text.words import content_stems
from app.core.types import NodeKind

#: Nodes whose text the session state does not hold (an attached document, an env event, a
#: task's result): a conversation they are linked to may have said any name.
_HOLDING_TEXT = frozenset({NodeKind.ARTIFACT, NodeKind.ENV})
#: How far back along a tree's chain its words are read (turns).
CHAIN_TURNS = 12
#: The share of an input's own content words a conversation must have said (and no other) for the
#: input to point to it.
POINTING = 0.25
#: Closenesses in meaning nearer than this are a tie (the size of the anchor router's own ambiguity
#: margin, ``SESSION_DEFAULT.delta``): a waiting question must be that much closer to a reply than
#: the question just asked to take it.
SAME_MEANING = 0.05


@dataclass(frozen=True)
class Referent:
    """``node``: the candidate a dependent input continues (None without candidates); ``pointed``:
    the trees (root node ids) whose own words the input repeats; ``asked``: the candidate whose
    answer's question the input replies to, if it opens with a statement (``answered``); ``ignored``:
    the tree of the latest turn when its answer asked a yes/no question the input does not take up
    and the input's words do not point to that tree."""

    node: str | None = None
    pointed: frozenset[str] = frozenset()
    asked: str | None = None
    ignored: str | None = None


def _order(state: SessionState, node_id: str) -> int:
    """How late the turn of ``node_id`` is: its last message's place in the session (-1: none)."""
    return max((state.messages[m].seq for m in state.turn_messages(node_id) if m in state.messages), default=-1)


def _tree_words(state: SessionState, node_id: str) -> frozenset[str]:
    """The content stems said on the chain back from ``node_id`` (``CHAIN_TURNS`` turns)."""
    words: set[str] = set()
    for node in state.graph.chain_back(node_id, limit=CHAIN_TURNS):
        for mid in state.turn_messages(node):
            if mid in state.messages:
                words.update(content_stems(state.messages[mid].text))
    return frozenset(words)


def shared_words(text: str, words: Mapping[str, frozenset[str]]) -> dict[str, int]:
    """Tree → how many of ``text``'s own content stems were said on that tree and on no other one."""
    own = set(own_words(text))
    return {tree: len(own & said - set().union(*(w for t, w in words.items() if t != tree)))
            for tree, said in words.items()}


def pointed(shared: Mapping[str, int], own: int, latest: str, meaning: Mapping[str, float]) -> dict[str, int]:
    """The trees an input with ``own`` content words points to, given its ``shared`` words per tree
    and how close in ``meaning`` it is to each: those words are at least ``POINTING`` of its own (a
    long input shares a word or two with any conversation by chance; a short one names what it
    means), and a tree other than the latest must share more words than it and be as close in
    meaning (the conversation just had is where a follow-up belongs unless something says otherwise)."""
    return {tree: n for tree, n in shared.items()
            if n and n >= POINTING * own and (tree == latest or (
                n > shared.get(latest, 0) and meaning.get(tree, 0.0) >= meaning.get(latest, 0.0)))}


def refer(state: SessionState, nodes: Sequence[str], text: str, sem: Mapping[str, float], *,
          request: bool = False) -> Referent:
    """The referent of ``text`` among the candidate ``nodes``, ``sem`` their closeness in meaning
    to it (see the module doc); a ``request`` (the input asks for work) takes up a yes/no question
    by saying what to do."""
    if not nodes:
        return Referent()
    order = {n: _order(state, n) for n in nodes}
    tips: dict[str, str] = {}  # tree → its latest candidate node
    meaning: dict[str, float] = {}  # tree → its candidates' best closeness in meaning
    for node in sorted(nodes, key=lambda n: (order[n], n)):
        tree = state.graph.root_of(node)
        tips[tree] = node
        meaning[tree] = max(meaning.get(tree, 0.0), sem.get(node, 0.0))
    latest = max(nodes, key=lambda n: (order[n], n))
    shared = shared_words(text, {tree: _tree_words(state, tip) for tree, tip in tips.items()})
    trees = pointed(shared, len(own_words(text)), state.graph.root_of(latest), meaning)
    best = max(trees.values(), default=0)
    leaders = [tree for tree, count in trees.items() if count == best]
    # A response token reacts to what was just said, unless none of the input's words are the latest
    # conversation's ("Sure thing! Can't wait to see your pottery": the offer made on another one).
    reacts = responds(text) and shared.get(state.graph.root_of(latest), 0) > 0
    node = tips[leaders[0]] if len(leaders) == 1 and not reacts else latest
    questions = {tree: question for tree, tip in tips.items() if (question := _question(state, tip))}
    waiting = {tree: tips[tree] for tree, question in questions.items()
               if request or tree in trees or takes_up(text, question)}
    ignored = state.graph.root_of(latest)
    return Referent(node=node, pointed=frozenset(trees), asked=answered(waiting, state.graph.root_of(node),
                                                                        frozenset(trees), latest, sem),
                    ignored=ignored if ignored in questions and ignored not in waiting else None)


def _question(state: SessionState, node_id: str) -> str | None:
    """The question the answer of ``node_id``'s turn ends with (it asks the user something), or None."""
    mids = state.turn_messages(node_id)
    if not mids or mids[-1] not in state.messages or not asks(text := state.messages[mids[-1]].text):
        return None
    return last_question(text)


def answered(waiting: Mapping[str, str], referred: str, pointed_to: frozenset[str], latest: str,
             sem: Mapping[str, float]) -> str | None:
    """The question a statement replies to, given the conversations ``waiting`` on one (tree → its
    tip, whose answer asked), the tree it ``referred`` to, the trees its words ``pointed_to``, the
    ``latest`` candidate and each candidate's closeness in ``sem``: the question of the conversation
    its words point to; else, when the latest answer asked, the waiting question closest in meaning
    to it (a reply is about what it answers; the latest within ``SAME_MEANING``: "the question just
    asked"); else none (an answer that asked nothing waits for no reply)."""
    if referred in waiting and referred in pointed_to:
        return waiting[referred]
    if latest not in waiting.values():
        return None
    return max(waiting.values(),
               key=lambda tip: (sem.get(tip, 0.0) + (SAME_MEANING if tip == latest else 0.0), tip == latest))


def unsaid_share(state: SessionState, node_id: str, names: Sequence[str], own: int) -> float:
    """How much of what an input talks about the conversation of ``node_id`` never mentioned: the
    ``names`` the input brings itself ("Peru") that the chain back from the node (``CHAIN_TURNS``
    turns) never said, as a share of the input's ``own`` content words (a short question about a
    new name is all about it; an input of more than ``OWN_LONG`` such words speaks for itself by its
    meaning). 0 for a conversation linked to text the state does not hold (``_HOLDING_TEXT``)."""
    if not names or own <= 0 or own > OWN_LONG:
        return 0.0
    graph = state.graph
    chain = list(graph.chain_back(node_id, limit=CHAIN_TURNS))
    if any(e.src in graph and graph.node(e.src).kind in _HOLDING_TEXT for node in chain for e in graph.in_edges(node)):
        return 0.0  # a document attached to it, a file or feed item routed to it: it may say anything
    said = "\n".join(state.messages[mid].text for node in chain
                     for mid in state.turn_messages(node) if mid in state.messages).lower()
    return min(1.0, sum(1 for name in names if name.lower() not in said) / own)
