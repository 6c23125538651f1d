"""SentenceEmbedder: folder checks (fast) and the real all-MiniLM-L6-v2 (``model``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.core.errors import ModelError
from app.core.ports import Embedder
from app.llm.embedder import SentenceEmbedder, check_model_dir


def _one_line_error(path: Path, fragment: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ModelError) as info:
        check_model_dir(path)
    message = str(info.value)
    assert fragment in message and path.name in message and "\n" not in message
    assert time.perf_counter() - started < 1.0


def test_missing_folder(tmp_path: Path) -> None:
    _one_line_error(tmp_path / "ghost-model", "does not exist")


def test_file_instead_of_folder(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_text("x")
    _one_line_error(path, "is a file")


def test_folder_without_config(tmp_path: Path) -> None:
    path = tmp_path / "empty-model"
    path.mkdir()
    _one_line_error(path, "not a sentence-transformers folder")


def test_folder_without_weights(tmp_path: Path) -> None:
    path = tmp_path / "no-weights"
    path.mkdir()
    (path / "modules.json").write_text("[]")
    _one_line_error(path, "no model weights")


def test_empty_weights(tmp_path: Path) -> None:
    path = tmp_path / "empty-weights"
    path.mkdir()
    (path / "modules.json").write_text("[]")
    (path / "model.safetensors").write_bytes(b"")
    _one_line_error(path, "empty weights")


@pytest.mark.model
def test_broken_weights_give_one_line_error(tmp_path: Path, embed_model_dir: Path) -> None:
    broken = tmp_path / "broken-minilm"
    broken.mkdir()
    for item in embed_model_dir.iterdir():
        if item.is_file() and item.name != "model.safetensors":
            (broken / item.name).write_bytes(item.read_bytes())
    (broken / "1_Pooling").mkdir()
    (broken / "1_Pooling" / "config.json").write_bytes((embed_model_dir / "1_Pooling" / "config.json").read_bytes())
    (broken / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}garbage")
    with pytest.raises(ModelError) as info:
        SentenceEmbedder(broken)
    message = str(info.value)
    assert "broken-minilm" in message and "\n" not in message


@pytest.mark.model
def test_implements_the_port(embedder: Any) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name == "all-MiniLM-L6-v2" and embedder.dim == 384


@pytest.mark.model
def test_batch_shape_dtype_and_normalisation(embedder: Any) -> None:
    texts = [f"Sentence number {i} about topic {i % 7}." for i in range(70)]
    vectors = embedder.embed(texts, batch_size=64)
    assert vectors.shape == (70, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    one_by_one = np.stack([embedder.embed([t], batch_size=1)[0] for t in texts[:5]])
    assert np.allclose(one_by_one, vectors[:5], atol=1e-4)
    assert embedder.embed([]).shape == (0, 384)


@pytest.mark.model
def test_similar_sentences_score_higher(embedder: Any) -> None:
    anchor, similar, unrelated = embedder.embed(
        ["The parser crashes when the file is empty.",
         "Reading an empty file makes the parser fail.",
         "We had pasta with tomatoes for dinner."]
    )
    assert float(anchor @ similar) > float(anchor @ unrelated) + 0.3
