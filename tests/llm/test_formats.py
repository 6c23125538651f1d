"""Prompt formats for GGUF files without a template (``app.llm.formats``)."""

from __future__ import annotations

from app.llm.formats import fold_system, format_gemma_turns


def test_system_text_is_folded_into_the_first_user_turn_for_gemma() -> None:
    messages = [{"role": "system", "content": "Context: A."}, {"role": "user", "content": "Q?"},
                {"role": "assistant", "content": "R."}, {"role": "user", "content": "Q2?"}]
    assert fold_system(messages) == [{"role": "user", "content": "Context: A.\n\nQ?"},
                                     {"role": "assistant", "content": "R."}, {"role": "user", "content": "Q2?"}]
    assert fold_system([{"role": "system", "content": "S"}]) == [{"role": "user", "content": "S"}]
    import llama_cpp.llama_chat_format as fmt

    prompt = format_gemma_turns(fmt)(messages=messages).prompt
    assert prompt.startswith("<start_of_turn>user\nContext: A.\n\nQ?<end_of_turn>\n")
    assert prompt.endswith("<start_of_turn>user\nQ2?<end_of_turn>\n<start_of_turn>model\n")
