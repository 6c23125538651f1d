"""``pcm`` on the scripted fakes: the real command line (``app.cli.main``) with the model loaders of
the composition root replaced by ``ScriptedChatModel`` and ``HashEmbedder``, so fault drills can
start and kill many ``pcm ask``/``import``/``store rebuild-index`` processes in seconds each.

    python -m tests.store.fake_pcm --data-dir DIR ask "..."      (any ``pcm`` arguments)

``PCM_FAKE_TOKEN_DELAY`` (seconds a token, default 0.01) and ``PCM_FAKE_REPLY_WORDS`` (default
160) shape the streamed answer: word ``i`` is ``w<i>``, so a stored answer can be checked against
what was printed. ``PCM_FAKE_START_AT`` (a ``time.time()`` value) holds the command, once every
module is imported, until then: racing processes then open the folder within milliseconds.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from app import main as wiring
from app.llm.fakes import HashEmbedder, ScriptedChatModel

EMBED_DIM = 64


def reply(words: int) -> str:
    """The scripted answer: ``w0 w1 … w<words-1>``."""
    return " ".join(f"w{i}" for i in range(words))


def fake_embedder() -> HashEmbedder:
    """The embedder the fake ``pcm`` uses (a verifier opening the same index must use it too)."""
    return HashEmbedder(dim=EMBED_DIM)


def _chat(_settings: Any, *, prompt_cache: bool = True) -> ScriptedChatModel:  # noqa: ARG001 - the loader's signature
    delay = float(os.environ.get("PCM_FAKE_TOKEN_DELAY", "0.01"))
    words = int(os.environ.get("PCM_FAKE_REPLY_WORDS", "160"))
    return ScriptedChatModel([reply(words)], token_delay_s=delay, context_size=8192)


def main(argv: list[str]) -> int:
    wiring.load_chat_model = _chat  # type: ignore[assignment]
    wiring.load_embedder = lambda _settings: fake_embedder()  # type: ignore[assignment]
    from app import cli_pipeline  # noqa: F401 - imported before the start signal, as every module is
    from app.cli import main as pcm

    wait_until(os.environ.get("PCM_FAKE_START_AT"))
    return pcm(argv)


def wait_until(start_at: str | None) -> None:
    """Sleep until the wall-clock time ``start_at`` (no wait when None or past)."""
    if start_at:
        time.sleep(max(0.0, float(start_at) - time.time()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
