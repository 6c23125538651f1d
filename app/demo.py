"""``pcm demo``: a short headless session that exercises the foundation end to end.

It loads the default models (offline), records a user turn durably, streams an answer from the
local GGUF model, stores the answer with its model-usage record, grows the session graph, indexes
the turn in LanceDB and searches it back — then says where everything is and how to export it.
The full pipeline (intent → plan → routing → recall → compile) replaces the plain prompt later.
"""

from __future__ import annotations

import sys
import time

from app import main as wiring
from app.config import Settings
from app.core.session.graph import SessionGraph
from app.core.types import EdgeKind, GraphEdge, GraphNode, Message, NodeKind, Role

SYSTEM_PROMPT = "You are a concise assistant inside PCM Canvas. Answer in at most three sentences."


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_demo(settings: Settings, prompt: str) -> int:
    """Run the demo; returns the process exit status."""
    _say(f"data folder: {settings.data_dir}")
    started = time.perf_counter()
    embedder = wiring.load_embedder(settings)
    _say(f"embedder {embedder.name} loaded in {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    chat = wiring.load_chat_model(settings)
    _say(f"chat model {chat.name} loaded in {time.perf_counter() - started:.1f} s")

    store = wiring.open_store(settings)
    try:
        index = wiring.open_index(settings, embedder)
        session_id = store.create_session("demo")
        graph = SessionGraph(session_id)
        graph.attach_sink(store)

        turn_id, user_message = store.record_user_input(session_id, prompt)
        graph.add_node(GraphNode(kind=NodeKind.TURN, label=prompt[:40], ref_id=turn_id))
        print(f"you: {prompt}")
        print("assistant: ", end="", flush=True)
        result = chat.chat(
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
            stage="answer",
            on_token=lambda piece: print(piece, end="", flush=True),
        )
        print()
        usage = result.usage.model_copy(update={"turn_id": turn_id})
        answer = Message(role=Role.ASSISTANT, content=result.text, turn_id=turn_id)
        store.set_turn_answer(turn_id, answer)
        store.add_model_usage(session_id, usage)
        artifact = GraphNode(kind=NodeKind.ARTIFACT, label="answer", ref_id=answer.message_id)
        graph.add_node(artifact)
        turn_node = graph.nodes(NodeKind.TURN)[0]
        graph.add_edge(GraphEdge(src=artifact.node_id, dst=turn_node.node_id, kind=EdgeKind.DERIVED_FROM))

        indexed = index.reconcile(store)
        hits = index.search_vector(prompt, k=2, session_id=session_id)
        tokens_per_s = usage.completion_tokens / max(usage.latency_ms / 1000, 1e-9)
        _say(
            f"\nturn {turn_id}: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion "
            f"tokens, first token {usage.first_token_latency_ms or 0:.0f} ms, {tokens_per_s:.0f} tokens/s"
        )
        _say(f"indexed {indexed} new rows; nearest to the prompt: {[h[0] for h in hits]}")
        _say(f"session {session_id} stored; export it with: pcm export {session_id} > session.json")
    finally:
        store.close()
    return 0
