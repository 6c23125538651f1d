"""validate_gguf on crafted bad files: each gives a one-line ModelError naming the file, quickly."""

from __future__ import annotations

import io
import struct
import time
import zipfile
from pathlib import Path

import pytest

from app.core.errors import ModelError
from app.llm import gguf
from app.llm.gguf import probe_gguf, read_gguf_header, validate_gguf
from tests.llm.gguf_util import gguf_bytes, nested_array, write_gguf


def _error(path: Path) -> str:
    started = time.perf_counter()
    with pytest.raises(ModelError) as info:
        validate_gguf(path)
    assert time.perf_counter() - started < 1.0
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    assert path.name in message
    assert info.value.__suppress_context__ or info.value.__context__ is None  # no chained traceback
    return message


def test_valid_synthetic_file_passes(tmp_path: Path) -> None:
    info = validate_gguf(write_gguf(tmp_path / "ok.gguf"))
    assert info.version == 3 and info.tensor_count == 2
    assert info.required_size == info.file_size
    assert info.metadata["general.architecture"] == "pcmtest"


def test_missing_file(tmp_path: Path) -> None:
    assert "does not exist" in _error(tmp_path / "nope.gguf")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"")
    assert "empty" in _error(path)


def test_folder(tmp_path: Path) -> None:
    path = tmp_path / "dir.gguf"
    path.mkdir()
    assert "folder" in _error(path)


def test_truncated_in_tensor_data(tmp_path: Path) -> None:
    path = tmp_path / "cut.gguf"
    data = gguf_bytes()
    path.write_bytes(data[:-40])
    message = _error(path)
    assert "truncated" in message and f"{len(data) - 40} of {len(data)} bytes" in message
    assert "pcm models fetch" in message


def test_truncated_in_header(tmp_path: Path) -> None:
    path = tmp_path / "cut-header.gguf"
    path.write_bytes(gguf_bytes()[:60])
    assert "truncated" in _error(path)


def test_truncated_to_magic_only(tmp_path: Path) -> None:
    path = tmp_path / "magic.gguf"
    path.write_bytes(b"GGUF\x03\x00")
    assert "truncated" in _error(path)


def test_wrong_magic(tmp_path: Path) -> None:
    path = tmp_path / "random.gguf"
    path.write_bytes(bytes(range(200, 256)) * 4)
    message = _error(path)
    assert "not a GGUF file" in message and "magic" in message and "pick a .gguf model" in message


def test_zip_renamed_gguf(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("model.bin", b"\0" * 100)
    path = tmp_path / "archive.gguf"
    path.write_bytes(buffer.getvalue())
    message = _error(path)
    assert "zip archive" in message and "PK" in message


def test_text_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.gguf"
    path.write_text("these are my notes, not a model\nsecond line\n")
    assert "text file" in _error(path)


def test_html_page(tmp_path: Path) -> None:
    path = tmp_path / "page.gguf"
    path.write_text("<!DOCTYPE html><html><body>404</body></html>")
    assert "HTML" in _error(path)


def test_git_lfs_pointer(tmp_path: Path) -> None:
    path = tmp_path / "pointer.gguf"
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n")
    assert "Git LFS pointer" in _error(path)


@pytest.mark.parametrize("version", [1, 99])
def test_unsupported_version(tmp_path: Path, version: int) -> None:
    path = write_gguf(tmp_path / f"v{version}.gguf", version=version)
    assert f"version {version}" in _error(path)


def test_big_endian(tmp_path: Path) -> None:
    path = tmp_path / "be.gguf"
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "big") + b"\0" * 100)
    assert "big-endian" in _error(path)


def test_implausible_counts(tmp_path: Path) -> None:
    path = tmp_path / "huge.gguf"
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (2**40).to_bytes(8, "little") + b"\0" * 64)
    assert "malformed" in _error(path)


def test_no_tensors(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "none.gguf", tensors=[])
    assert "no tensors" in _error(path)


def test_header_parse_reads_strings_and_arrays(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "meta.gguf",
        metadata={"tokenizer.ggml.tokens": ["a", "b", "c"], "ids": [1, 2, 3], "flag": True, "x": 1.5},
    )
    info = read_gguf_header(path)
    assert info.metadata["flag"] is True and info.metadata["x"] == 1.5
    assert "tokenizer.ggml.tokens" not in info.metadata  # arrays are skipped, not kept


def test_probe_validates_first_without_a_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "text.gguf"
    path.write_text("hello")
    monkeypatch.setattr(gguf.subprocess, "run", lambda *a, **k: pytest.fail("child started"))
    with pytest.raises(ModelError, match="text.gguf"):
        probe_gguf(path)


def test_probe_reports_a_crash_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_gguf(tmp_path / "crash.gguf")
    monkeypatch.setattr(gguf, "_PROBE_SCRIPT", "import os, sys; sys.stderr.write('GGML_ASSERT(x) failed\\n'); os.abort()")
    with pytest.raises(ModelError) as info:
        probe_gguf(path, timeout_s=30)
    message = str(info.value)
    assert "\n" not in message and "crash.gguf" in message and "crashed" in message
    assert "SIGABRT" in message and "GGML_ASSERT" in message


def test_probe_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_gguf(tmp_path / "slow.gguf")
    monkeypatch.setattr(gguf, "_PROBE_SCRIPT", "import time; time.sleep(30)")
    started = time.perf_counter()
    with pytest.raises(ModelError, match=r"slow\.gguf did not load within 1 s"):
        probe_gguf(path, timeout_s=1)
    assert time.perf_counter() - started < 10


def test_chat_model_rejects_bad_file_before_llama(tmp_path: Path) -> None:
    from app.llm.llama import LlamaChatModel

    path = tmp_path / "bad.gguf"
    path.write_bytes(b"PK\x03\x04" + b"\0" * 64)
    with pytest.raises(ModelError, match="bad.gguf is a zip archive"):
        LlamaChatModel(path)


# --------------------------------------------------------------------------- hostile headers and paths


def test_arrays_nested_20000_deep_are_malformed_not_a_recursion_error(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "nested.gguf", metadata={"pcm.nested": nested_array(20_000)})
    message = _error(path)
    assert "malformed GGUF header" in message and "key 'pcm.nested' holds arrays nested more than 16 deep" in message


def test_arrays_nested_a_few_deep_are_read(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "nested3.gguf", metadata={"a": nested_array(3), "b": nested_array(16), "c": 7})
    info = validate_gguf(path)
    assert info.metadata["c"] == 7 and "a" not in info.metadata


def test_an_array_of_arrays_claiming_more_children_than_bytes_is_truncated(tmp_path: Path) -> None:
    claim = struct.pack("<IIQ", 9, 9, 1 << 40)  # an array of 2^40 arrays in a tiny file
    path = write_gguf(tmp_path / "claims.gguf", metadata={"x": claim})
    assert "truncated" in _error(path)


def test_a_long_hostile_key_is_shortened_in_the_message(tmp_path: Path) -> None:
    key = "k\n" * 500
    path = write_gguf(tmp_path / "key.gguf", metadata={key: nested_array(40)})
    message = _error(path)
    assert "\\nk\\n" in message and len(message) < 400


def test_a_symlink_loop_is_named_as_such(tmp_path: Path) -> None:
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.symlink_to(b)
    b.symlink_to(a)
    assert "a.gguf is a symbolic link loop" in _error(a)
    assert gguf.display_path(a).endswith("a.gguf")  # no RuntimeError from resolving the loop
    with pytest.raises(ModelError, match="a.gguf is a symbolic link loop"):
        probe_gguf(a)


def test_a_dangling_symlink_says_where_it_points(tmp_path: Path) -> None:
    link = tmp_path / "gone.gguf"
    link.symlink_to(tmp_path / "deleted.gguf")
    assert "gone.gguf is a symbolic link to" in _error(link) and "deleted.gguf, which does not exist" in _error(link)
