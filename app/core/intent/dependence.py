"""How much an input leans on what came before, and whether it opens a new topic.

A follow-up ("And how long does the train take?", "make it shorter", "what about Osaka?",
"Thanks! Did you make it yourself?") cannot be read alone: it answers or builds on the turn
before it. ``read_dependence`` measures that from the text alone, by the kinds of evidence
linguistics knows a dependent utterance by, each a strength in [0, 1]:

* a *response token* opening it ("thanks", "wow", "yes", "ok", "sounds good"): it answers a turn;
* a *connective* opening it ("and", "but", "so", "also", "what about", "how about", "make it"):
  it continues one;
* *reference without an antecedent* in its first words: third-person and demonstrative pronouns
  ("it", "that", "those", "there", "the other one"), "your" for the other side's last words;
* *ellipsis*: a fragment with no verb of its own ("In metric?", "The second one.");
* *relational words* that need something to compare with ("cheaper", "instead", "another", "again");
* *few content words of its own* — unless one of them is a name the input brings itself ("What is
  the capital of Peru?" names its own subject: a short question is not a follow-up for being short);
* a *selection* ("Which neighbourhood…?", "What hotel…?"): an interrogative determiner before a
  bare noun chooses among a set the conversation provides.

They combine as independent evidence (``1 − Π(1 − s)``); a long input with many content words of
its own can stand alone, so its score is damped. ``topic_shift`` reads the opposite: a greeting or an
opening formula ("how are you", "long time no see"), or an announced change of subject ("by the
way, …", "new question: …", "unrelated, but …") opens something new. Anchor routing turns both into features of the candidates (the ``follow`` and
``shift`` features, ``app.core.routing.candidates``). ``takes_up`` tells whether a statement
answers the question an answer ended with: an open question takes any statement, a yes/no question
waits for a position on it (a response token, a polarity word, its auxiliary echoed — "I haven't",
"It was" — or its words repeated). Pure and deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.core.text.words import STOPWORDS, content_stems, tokenize


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


#: Strength of each kind of evidence (set by what each kind says, before any data was seen; the
#: router's weight of the whole signal is what the follow-up dev set fits, on one half).
RESPONSE, CONNECTIVE, REFERENCE, ELLIPSIS, RELATIONAL, SELECTION = 0.5, 0.6, 0.35, 0.5, 0.25, 0.3
FEW_WORDS = {0: 0.4, 1: 0.35, 2: 0.3, 3: 0.15, 4: 0.05}
GREETING, ANNOUNCED = 0.6, 0.8
#: A yes/no question put to the user and left unanswered by a statement that does not lean on it:
#: the user has left that exchange (weaker evidence of a new topic than a greeting).
UNANSWERED = 0.4
#: Past this many content words of its own an input carries its subject in its words (its meaning
#: speaks for it): what it says of its place in the conversation weighs less.
OWN_LONG = 8

_RESPONSE_RE = _rx(r"^(?:thanks|thank you|thx|ty|wow|whoa|yes|yeah|yep|yup|no|nope|nah|ok|okay|k|sure|"
                   r"great|cool|nice|perfect|awesome|amazing|right|exactly|true|indeed|agreed|fair enough|"
                   r"got it|i see|makes sense|sounds (?:good|great|like)|that'?s|ha(?:ha)*|lol|hmm+|ah+|oh+|"
                   r"aw+|congrats|congratulations|well done|way to go|good|fine|alright|i bet|of course|"
                   r"interesting|uh|um|gotcha)\b")
_CONNECTIVE_RE = _rx(r"^(?:and|but|so|also|plus|then|or|besides|still|instead|otherwise|now|what about|"
                     r"how about|what if|and if|same (?:for|with|thing)|as for|why not|make (?:it|that|them|this)|"
                     r"do (?:it|that|the same)|try (?:it|that|again)|more|again|another|the (?:first|second|third|"
                     r"last|next|other|previous|same) one)\b")
_REFERENCE_RE = _rx(r"\b(?:it|its|they|them|their|theirs|he|him|his|she|her|there|those|these|such|"
                    r"(?:the|that|this) (?:same|other|one|ones|former|latter)|your)\b|"
                    r"\b(?:this|that)\b(?!\s+(?:is a|morning|afternoon|evening|week|weekend|month|year|time|"
                    r"way)\b)")
# "that" after these opens a clause of the input's own ("I think that…"), it refers to nothing.
_CLAUSE_THAT_RE = _rx(r"\b(?:think|know|say|said|sure|hope|believe|glad|mean|means|so|such|feel|felt|"
                      r"realize|realized|guess|thought)\s+that\b")
_RELATIONAL_RE = _rx(r"\b(?:more|less|fewer|instead|another|else|again|too|either|rest|shorter|longer|"
                     r"cheaper|faster|slower|better|worse|bigger|smaller|simpler|easier|harder|earlier|later|"
                     r"same|different|also|as well|the other|previous|next)\b")
# A verb of its own: an auxiliary, a modal, or a word with a verb's ending; a fragment has none.
_VERB_RE = _rx(r"\b(?:is|are|was|were|am|be|been|do|does|did|have|has|had|can|could|will|would|should|"
               r"shall|may|might|must|\w+'(?:s|re|ve|ll|d|m)|\w{3,}(?:ed|ing|ize|ise|ify|ate))\b")
_PREPOSITION_RE = _rx(r"^(?:in|on|at|for|with|without|by|from|to|into|via|under|over|about|after|before|"
                      r"during|the|a|an|only|just|maybe)\b")
# "Which neighbourhood…", "what hotel…": an interrogative determiner before a noun (not a verb, an
# adjective's degree or a preposition) selects from what the conversation provides.
_SELECTION_RE = _rx(r"^(?:so\s+|and\s+|ok\s+|okay\s+)?(?:which|what)\s+(?!(?:is|are|was|were|do|does|did|can|could|"
                    r"would|should|will|about|if|else|kind|sort|type|time|day|year|a|an|the|of|to|for|in)\b)[a-z]+")
# A name the input brings itself: a capitalised word inside the sentence (not its first word, not
# "I"), or a token no conversation says by chance — a file name, a path, an identifier, a number
# with letters ("plan.md", "src/parse.py", "sales_q3", "v2").
_OWN_NAME_RE = re.compile(r"(?<![.!?]\s)(?<!^)\b(?!I\b)[A-Z][\w-]+|\b\w+\.[A-Za-z]\w{0,4}\b|"
                          r"\w/\w|\w_\w|\b(?=\w*\d)(?=\w*[A-Za-z])\w{2,}")
# An indefinite noun phrase brings a new referent of the input's own ("a cat", "an email"), unlike
# a quantity ("a lot", "a bit") or a relational one ("another", "a better one").
_INDEFINITE_RE = _rx(r"\b(?:a|an)\s+(?!(?:lot|bit|little|few|couple|while|kind|sort|one|more|less|bigger|"
                     r"smaller|better|cheaper|shorter|longer|different|similar|same)\b)[a-z]")
# The words a question opens with (a statement does not).
_QUESTION_OPEN_RE = _rx(r"^\W*(?:who|what|when|where|why|how|which|whose|is|are|was|were|do|does|did|can|could|"
                        r"would|will|should|shall|may|have|has|had)\b")
# A greeting opens a conversation, unless it only leads into thanks ("Hi, thanks for asking").
_GREETING_RE = _rx(r"^(?:hi|hey|hello|hiya|howdy|good (?:morning|afternoon|evening)|greetings|yo)\b"
                   r"(?![\s,!.]*(?:thanks|thank you|thx))")
# The formulae people open (or reopen) a conversation with.
_OPENING_RE = _rx(r"\b(?:long time no (?:see|talk|chat|speak)|how (?:are|have) you (?:been|doing)|how are you|"
                  r"how'?s it going|what'?s up|good to (?:see|hear from) you|(?:great|nice|good) to (?:chat|talk) "
                  r"again|since we (?:last )?(?:spoke|talked|chatted))\b")
_ANNOUNCED_RE = _rx(r"\b(?:by the way|btw|on (?:a|another) (?:different |separate )?note|new (?:question|topic|"
                    r"task|subject)|another (?:question|topic|thing)|different (?:question|topic|subject)|"
                    r"unrelated(?: question)?|changing the subject|change of (?:subject|topic)|switching gears|"
                    r"quick question|separate question|something (?:else|different))\b")

# A yes/no question opens with an auxiliary or a modal, at most after a connective ("Have you tried
# it yet?", "So, do you have any goals?"); the family of that auxiliary is what its answer echoes.
_AUXILIARIES = {"do": "do does did don't doesn't didn't", "have": "have has had haven't hasn't hadn't",
                "be": "is are was were am isn't aren't wasn't weren't", "can": "can could can't cannot couldn't",
                "will": "will would won't wouldn't", "shall": "shall should shouldn't", "may": "may might",
                "must": "must mustn't"}
_FAMILY = {form: family for family, forms in _AUXILIARIES.items() for form in forms.split()}
_POLAR_RE = _rx(r"^\W*(?:(?:so|and|but|also|well|ok|okay|by the way|btw)\W+)?(" + "|".join(_FAMILY) + r")(?!\w)")
# How an answer echoes a yes/no question's auxiliary ("Have you…?" "I haven't…", "I've…"; "Was it…?"
# "It was…"): one of its forms, or its contraction.
_CONTRACTED_AUX = {"have": "ve", "be": "m|re|s", "will": "ll", "shall": "ll"}
_ECHO_RE = {family: _rx(r"\b(?:" + "|".join(forms.split()) + r")(?!\w)"
                        + (r"|\w'(?:" + _CONTRACTED_AUX[family] + r")\b" if family in _CONTRACTED_AUX else ""))
            for family, forms in _AUXILIARIES.items()}
# The words that take a position on a yes/no question ("Not yet", "Never", "Definitely!").
_POLARITY_RE = _rx(r"^\W*(?:\w+\W+){0,2}?(?:not|never|definitely|absolutely|certainly|maybe|probably|perhaps|"
                   r"of course)\b")

# A function word contracted ("what's", "where's", "there'll"): as empty as the word itself (the
# house tokenizer keeps contractions whole, and the light stemmer makes "what'" of "what's").
_CONTRACTED_RE = re.compile(r"\b(?:" + "|".join(sorted(w for w in STOPWORDS if w.isalpha())) + r")'[a-z]+\b",
                            re.IGNORECASE)

#: The words the cues themselves are made of do not count as the input's own content words.
_CUE_WORDS = frozenset(content_stems(
    "wow yeah yep yup nope nah sure great cool nice perfect awesome amazing right exactly true indeed agreed "
    "fair enough see makes sense sounds good like haha lol hmm congrats congratulations well done way go fine "
    "alright bet course interesting gotcha make try instead another else again rest shorter longer cheaper "
    "faster slower better worse bigger smaller simpler easier harder earlier later different previous next"))


@dataclass(frozen=True)
class Dependence:
    """What the text says of its place in a conversation: ``score`` (how much it leans on what came
    before, [0, 1]), ``topic_shift`` (how plainly it opens something new, [0, 1]) and the kinds of
    evidence found (for the trace)."""

    score: float = 0.0
    topic_shift: float = 0.0
    cues: tuple[str, ...] = ()


def _head(text: str, words: int = 12) -> str:
    """The first ``words`` words of ``text``: a reference that points back stands early."""
    return " ".join(text.split()[:words])


def own_words(text: str) -> list[str]:
    """The content stems of ``text`` that are its own: not the words its cues (a greeting, an
    opening formula, a response token, …) are made of."""
    bare = _OPENING_RE.sub(" ", _GREETING_RE.sub(" ", text.replace("\u2019", "'")))
    bare = _CONTRACTED_RE.sub(" ", bare)
    return [s for s in content_stems(bare) if s not in _CUE_WORDS]


def responds(text: str) -> bool:
    """Whether ``text`` opens with a response token ("Thanks!", "Wow, …", "Yes"): it reacts to what
    was just said, whatever its later words name."""
    return _RESPONSE_RE.match(" ".join(text.replace("\u2019", "'").split()).strip(" \"'")) is not None


def asks(text: str) -> bool:
    """Whether ``text``'s last sentence is a question (an answer that asks the user something)."""
    return text.rstrip().rstrip(")\"'\u201d").endswith("?")


def states(text: str) -> bool:
    """Whether ``text`` opens with a statement, not a question: the reply a question waits for."""
    first = re.split(r"(?<=[.!?])\s+", text.strip(), maxsplit=1)[0]
    return bool(first) and not first.endswith("?") and not _QUESTION_OPEN_RE.match(first)


def read_dependence(text: str) -> Dependence:
    """How much ``text`` depends on what came before, and how plainly it opens a new topic."""
    t = " ".join(text.replace("\u2019", "'").split()).strip(" \"'")
    if not t:
        return Dependence()
    head = _head(t)
    found: list[tuple[str, float]] = []
    if _RESPONSE_RE.match(t):
        found.append(("response", RESPONSE))
    if _CONNECTIVE_RE.match(t):
        found.append(("connective", CONNECTIVE))
    own = own_words(t)
    opening = _GREETING_RE.match(t) or _OPENING_RE.search(head)
    head = _OPENING_RE.sub(" ", head)  # "how's it going" refers to nothing before it
    references = len(_REFERENCE_RE.findall(head)) - len(_CLAUSE_THAT_RE.findall(head))
    if references > 0:  # among many words of its own a pronoun mostly points inside the input
        found.append(("reference", min(0.6, REFERENCE * references) * min(1.0, 3 / max(1, len(own)))))
    words = tokenize(t)
    if len(words) <= 5 and (not _VERB_RE.search(t) or _PREPOSITION_RE.match(t)):
        found.append(("ellipsis", ELLIPSIS))
    if _RELATIONAL_RE.search(head):
        found.append(("relational", RELATIONAL))
    named = _OWN_NAME_RE.search(t) is not None
    # Few words of its own leave the subject to the context, unless the input names it or brings it
    # in itself ("a good name for a cat"); a bare greeting is whole without words of its own.
    if len(own) in FEW_WORDS and not opening and not named and not _INDEFINITE_RE.search(t):
        found.append(("few words", FEW_WORDS[len(own)]))
    if len(own) <= 3 and not named and (chosen := _SELECTION_RE.match(t)) and not _VERB_RE.fullmatch(chosen[0].split()[-1]):
        found.append(("selection", SELECTION))
    remaining = 1.0
    for _, strength in found:
        remaining *= 1.0 - strength
    damp = 1.0 if len(own) <= OWN_LONG else max(0.5, 1.0 - (len(own) - OWN_LONG) / 16)
    shift = ANNOUNCED if _ANNOUNCED_RE.search(head) else GREETING if opening else 0.0
    return Dependence(score=round((1.0 - remaining) * damp, 4), topic_shift=shift,
                      cues=tuple(name for name, _ in found))


def last_question(text: str) -> str | None:
    """The last sentence of ``text`` that asks something, or None."""
    asked = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.rstrip(")\"'\u201d").endswith("?")]
    return asked[-1] if asked else None


def takes_up(text: str, question: str) -> bool:
    """Whether ``text`` answers ``question`` as far as its form tells. An open question ("What's new
    with you?") takes any statement for an answer; a yes/no one ("Have you tried it yet?") waits for
    a position on it: a response token or a polarity word in the first words ("Yes", "Not yet"),
    its auxiliary echoed there ("I haven't…", "It was…"), or some of its own words repeated."""
    polar = _POLAR_RE.match(question)
    if polar is None:
        return True
    t = " ".join(text.replace("\u2019", "'").split())
    first = _head(re.split(r"(?<=[.!?])\s+", t, maxsplit=1)[0], 6)
    return (responds(t) or _POLARITY_RE.match(t) is not None
            or _ECHO_RE[_FAMILY[polar[1].lower()]].search(first) is not None
            or bool(set(own_words(t)) & set(own_words(question))))
