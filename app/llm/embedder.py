"""The sentence-transformers embedder: ``SentenceEmbedder`` implements the ``Embedder`` port.

A folder that holds a plain BERT encoder with mean or CLS pooling (the bundled all-MiniLM-L6-v2,
and most small local embedders) runs on ``app.llm.bert`` — the same vectors, without importing
sentence-transformers (about 4 s of every start). Any other folder loads with sentence-transformers.

It loads a local model folder only (``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` are set
before sentence-transformers is imported, and loading uses ``local_files_only``), so nothing is
ever downloaded at run time. Loading takes seconds: construct it on the ``embed`` executor.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.core.errors import ModelError
from app.llm.bert import BertEncoder
from app.llm.gguf import display_path

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")

# Before anything can import a hub client (huggingface_hub reads these once, at import).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


def _offline_sentence_transformers() -> Any:
    """Import sentence_transformers with every hub client forced offline."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import sentence_transformers
    except Exception as exc:
        raise ModelError(f"sentence-transformers is not usable ({type(exc).__name__}: {exc}); "
                         "reinstall the app") from None
    try:  # transformers draws a "Loading weights" progress bar on stderr otherwise
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # an optional nicety; never fail a load over it
        pass
    return sentence_transformers


def check_model_dir(model_dir: str | os.PathLike[str]) -> Path:
    """Check ``model_dir`` looks like a sentence-transformers folder; raise ``ModelError`` if not."""
    path = Path(model_dir)
    shown = display_path(path)
    fix = "run `pcm models fetch` or pick an embedding model folder"
    if not path.exists():
        raise ModelError(f"embedding model folder {shown} does not exist; {fix}")
    if not path.is_dir():
        raise ModelError(f"embedding model {shown} is a file, not a model folder; {fix}")
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ModelError(f"{shown} is not a sentence-transformers folder (no modules.json or "
                         f"config.json); {fix}")
    weights = [path / w for w in _WEIGHT_FILES if (path / w).is_file()]
    if not weights:
        raise ModelError(f"{shown} has no model weights (model.safetensors); {fix}")
    if any(w.stat().st_size == 0 for w in weights):
        raise ModelError(f"{shown} has an empty weights file; delete the folder and {fix}")
    return path


class SentenceEmbedder:
    """A local sentence-transformers model (``Embedder`` port): L2-normalised float32 rows.

    The constructor loads the model (seconds); call it, and ``embed``, on the ``embed`` executor.
    Raises ``ModelError`` (one line) when the folder is missing or the model does not load.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        device: str = "cpu",
        name: str | None = None,
        n_threads: int | None = None,
    ) -> None:
        path = check_model_dir(model_dir)
        self.path = path
        self.name = name or path.name
        started = time.perf_counter()
        try:
            self._bert = BertEncoder.load(path) if device == "cpu" else None
            if self._bert is not None:
                dim = self._bert.dim
            else:
                st = _offline_sentence_transformers()
                self._model = st.SentenceTransformer(str(path), device=device, local_files_only=True)
                getter = getattr(self._model, "get_embedding_dimension", None) or \
                    self._model.get_sentence_embedding_dimension
                dim = getter()
        except ModelError:
            raise
        except Exception as exc:
            why = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise ModelError(f"could not load the embedding model {display_path(path)} ({why}); "
                             "delete the folder and run `pcm models fetch`") from None
        if not dim:
            raise ModelError(f"{display_path(path)} does not declare an embedding size; pick another model")
        self.dim = int(dim)
        self.backend = "bert" if self._bert is not None else "sentence-transformers"
        import torch

        if n_threads is not None:
            torch.set_num_threads(n_threads)
        self._batch_threads = n_threads or torch.get_num_threads()
        self.load_seconds = time.perf_counter() - started

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim) with L2-normalised rows."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        # A query (a few short texts) runs on one thread: with two, torch's threads wait on each
        # other whenever the other core is busy (LanceDB, the UI), and latency spikes 5×.
        self._threads(1 if len(texts) <= 4 else self._batch_threads)
        try:
            if self._bert is not None:
                return self._bert.encode(texts, batch_size=batch_size)
            vectors = self._model.encode(
                list(texts),
                batch_size=max(1, batch_size),
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            why = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise ModelError(f"embedding with {self.name} failed ({why})") from None
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)

    def _threads(self, n: int) -> None:
        import torch

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)

    def __repr__(self) -> str:
        return f"SentenceEmbedder({self.name!r}, dim={self.dim}, backend={self.backend!r})"
