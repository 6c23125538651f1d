"""The window shows before the engine is imported: building and showing it loads no engine code.

The engine's modules (the composition root, the facade and its services, the build pipeline, the
store, the sensors, LanceDB, torch, llama.cpp) load when the controller loads the engine, on the
loading thread, after the window is up. Measured in a fresh process, since the test process has
imported all of them already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Modules (and their submodules) that must not be loaded once the window is shown.
ENGINE_MODULES = (
    "app.main", "app.core.engine", "app.core.pipeline.builder", "app.core.pipeline.record",
    "app.core.context.retrieval", "app.core.session.state", "app.store", "app.sensors",
    "lancedb", "pyarrow", "torch", "llama_cpp",
)

SCRIPT = """
import json, sys
from app.desktop import services
from app.config import Settings
from app.ui.app import application, apply_theme, MainWindow

settings = Settings.load(sys.argv[1])
app = application()
apply_theme(app, settings.theme == "dark")
window = MainWindow(settings, services())
window.show()
app.processEvents()
forbidden = tuple(sys.argv[2].split(","))
loaded = sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in forbidden))
print(json.dumps({"shown": window.isVisible(), "loaded": loaded}))
"""


def test_showing_the_window_imports_no_engine_code(tmp_path: Path) -> None:
    script = tmp_path / "show_window.py"
    script.write_text(SCRIPT, encoding="utf-8")
    # This checkout's app package, whatever the working directory (a neutral one: python puts the
    # script's folder first on sys.path, never a checkout).
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": path}
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "data"), ",".join(ENGINE_MODULES)],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["shown"]
    assert result["loaded"] == [], f"the window loaded engine modules before the engine: {result['loaded']}"
