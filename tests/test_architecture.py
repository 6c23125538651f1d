"""The layering rules of DESIGN.md §2, checked by import-linter contracts in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_hold() -> None:
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: " in result.stdout and " broken" in result.stdout
    assert "0 broken" in result.stdout


def test_contracts_cover_every_layer() -> None:
    """A new top-level package must be placed in the contracts, not silently exempt."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for package in sorted(p.name for p in (ROOT / "app").iterdir() if (p / "__init__.py").exists()):
        assert f'"app.{package}"' in text, f"app.{package} is not named in any import contract"


def test_core_imports_only_allowed_libraries() -> None:
    """Belt and braces for the contract: scan core's import lines directly."""
    allowed = {"app", "pydantic", "networkx", "numpy", "__future__"}
    stdlib = set(sys.stdlib_module_names)
    offenders = []
    for path in (ROOT / "app" / "core").rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in {"import", "from"} and not line.startswith(" "):
                top = words[1].split(".")[0]
                if top and top not in allowed and top not in stdlib:
                    offenders.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_only_the_ui_package_names_qt() -> None:
    """Composition modules (app/desktop.py, app/bench_ui.py) reach Qt only through app.ui; the
    import contract cannot say so, since their indirect imports of Qt through app.ui are fine."""
    offenders = []
    for path in (ROOT / "app").rglob("*.py"):
        if path.is_relative_to(ROOT / "app" / "ui"):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in {"import", "from"} and words[1].split(".")[0] in {"PySide6", "qasync"}:
                offenders.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert not offenders, offenders
