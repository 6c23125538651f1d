"""packaging/bundle.ini, the names the spec, the .deb script, installer.iss and these tests share."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "packaging" / "pcm_canvas.spec"
ISS = ROOT / "installer.iss"


def bundle_names() -> dict[str, str]:
    ini = configparser.ConfigParser()
    ini.read(ROOT / "packaging" / "bundle.ini", encoding="utf-8")
    return dict(ini["bundle"])


def bundle_dir() -> Path:
    """Where packaging/build.sh leaves the bundle (PyInstaller --distpath dist)."""
    return ROOT / "dist" / bundle_names()["folder"]
