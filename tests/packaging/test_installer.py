"""installer.iss and the PyInstaller spec agree (fast, no build): every file the Windows installer
takes is inside the folder the spec produces, every program it starts or links to is one of the
spec's executables, and the names all come from packaging/bundle.ini."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import PureWindowsPath

import app
from app.config import APP_NAME
from tests.packaging.names import ISS, ROOT, SPEC, bundle_names

READ_INI = re.compile(r'^#define\s+(\w+)\s+ReadIni\(Ini,\s*"bundle",\s*"(\w+)",\s*""\)(?:\s*\+\s*"([^"]*)")?\s*$')


def _defines() -> dict[str, str]:
    """installer.iss's #define NAME ReadIni(Ini, "bundle", "key", "") [+ "suffix"], resolved."""
    names, out = bundle_names(), {}
    for line in ISS.read_text(encoding="utf-8").splitlines():
        found = READ_INI.match(line.strip())
        if found:
            name, key, suffix = found.groups()
            assert key in names, f"installer.iss reads {key!r}, which packaging/bundle.ini lacks"
            out[name] = names[key] + (suffix or "")
    return out


def _sections() -> dict[str, list[str]]:
    """The lines of each [Section] (comments and preprocessor lines left out), #defines expanded."""
    defines, sections, current = _defines(), {}, ""
    for raw in ISS.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith((";", "#")):
            continue
        header = re.fullmatch(r"\[(\w+)\]", line)
        if header:
            current = header.group(1)
            sections[current] = []
            continue
        unknown = set(re.findall(r"\{#(\w+)\}", line)) - set(defines)
        assert not unknown, f"installer.iss uses undefined {unknown}: {line}"
        sections.setdefault(current, []).append(re.sub(r"\{#(\w+)\}", lambda m: defines[m.group(1)], line))
    return sections


def _params(line: str) -> dict[str, str]:
    """`Name: "value"; Other: value` → {name: value} (quotes off, doubled quotes kept as one)."""
    out = {}
    for name, quoted, bare in re.findall(r'(\w+):\s*(?:"((?:[^"]|"")*)"|([^;]*))\s*(?:;|$)', line):
        out[name.lower()] = (quoted.replace('""', '"') if quoted else bare.strip())
    return out


def _spec_names() -> dict[str, list[str]]:
    """The `name=` of the spec's EXE and COLLECT calls, as the bundle.ini keys they read."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(SPEC.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"EXE", "COLLECT"}:
            name = next(k.value for k in node.keywords if k.arg == "name")
            assert (isinstance(name, ast.Subscript) and isinstance(name.value, ast.Name) and name.value.id == "NAMES"
                    and isinstance(name.slice, ast.Constant)), f"{node.func.id}(name=...) must be a bundle.ini name"
            out.setdefault(node.func.id, []).append(str(name.slice.value))
    return out


def test_the_spec_names_its_executables_and_folder_from_bundle_ini() -> None:
    assert _spec_names() == {"EXE": ["gui", "cli"], "COLLECT": ["folder"]}  # cli: its own .exe on Windows
    spec = SPEC.read_text(encoding="utf-8")  # elsewhere <cli> is a link to <gui> beside it
    assert 'CLI_LINK = Path(DISTPATH, NAMES["folder"], NAMES["cli"])' in spec and 'os.symlink(NAMES["gui"], CLI_LINK)' in spec
    build = (ROOT / "packaging" / "build.sh").read_text(encoding="utf-8")
    assert "--distpath dist " in build and 'OUT="dist/$BUNDLE_FOLDER"' in build  # where installer.iss looks


def test_every_file_the_installer_takes_is_inside_the_bundle_the_spec_produces() -> None:
    names, sections = bundle_names(), _sections()
    bundle = PureWindowsPath("dist", names["folder"])
    sources = [_params(line)["source"] for line in sections["Files"]]
    assert sources, "installer.iss installs no files"
    for source in sources:
        path = PureWindowsPath(source)
        assert path.parent == bundle and path.name == "*", f"{source} is not the bundle folder {bundle}\\*"
    exes = {names["gui"] + ".exe", names["cli"] + ".exe"}
    referenced = []
    for section in ("Icons", "Run", "Registry", "Setup"):
        for line in sections.get(section, []):
            referenced += re.findall(r"\{app\}\\([^\"';,]+)", line)
    assert referenced and set(referenced) <= exes, f"{set(referenced) - exes} are not executables the spec makes"
    assert names["gui"] + ".exe" in referenced  # the shortcuts start the desktop app
    setup = dict(line.split("=", 1) for line in sections["Setup"])
    assert (ROOT / PureWindowsPath(setup["SetupIconFile"]).as_posix()).is_file()


def test_per_user_install_shortcuts_and_an_uninstaller_that_keeps_the_data_unless_asked() -> None:
    sections, names = _sections(), bundle_names()
    setup = dict(line.split("=", 1) for line in sections["Setup"])
    assert setup["PrivilegesRequired"] == "lowest" and setup["DefaultDirName"].startswith("{autopf}")
    icons = [_params(line) for line in sections["Icons"]]
    assert any(i["name"].startswith("{group}") for i in icons)  # Start menu
    desktop = [i for i in icons if i["name"].startswith("{autodesktop}")]
    assert desktop and desktop[0]["tasks"] == "desktopicon"
    tasks = {_params(line)["name"]: _params(line) for line in sections["Tasks"]}
    assert "unchecked" in tasks["desktopicon"]["flags"]  # optional, off by default
    code = "\n".join(sections["Code"])
    assert "procedure CurUninstallStepChanged" in code and "usPostUninstall" in code
    assert "MB_DEFBUTTON2" in code and "= IDYES then" in code and "UninstallSilent()" in code  # "No" keeps it
    assert f"{{localappdata}}\\{names['data_folder']}" in code
    assert names["data_folder"] == APP_NAME  # the folder app.config puts the user's data in


def test_exported_sessions_are_associated_by_the_extension_the_app_writes() -> None:
    names, sections = bundle_names(), _sections()
    ext = names["export_ext"]
    ui = (ROOT / "app" / "ui" / "file_actions.py").read_text(encoding="utf-8")
    assert f'"Context model JSON (*{ext})"' in ui and f'{ext}"' in ui  # File > Export's filter and default name
    registry = [_params(line) for line in sections["Registry"]]
    open_with = [r for r in registry if r["subkey"] == f"Software\\Classes\\{ext}\\OpenWithProgids"]
    assert open_with and open_with[0]["valuename"] == names["progid"]
    command = next(r for r in registry if r["subkey"].endswith("\\shell\\open\\command"))
    assert command["valuedata"] == f'"{{app}}\\{names["gui"]}.exe" "%1"'  # pcm-canvas FILE imports it
    assert all(r["root"] == "HKA" for r in registry)  # the user's own classes: no admin rights


def test_the_app_hands_its_python_children_to_the_bundles_console_executable() -> None:
    from app.frozen import CLI_NAME

    assert CLI_NAME == bundle_names()["cli"]


def test_the_version_is_the_apps() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert bundle_names()["version"] == app.__version__ == project["version"]
    assert "pyinstaller" in " ".join(project["optional-dependencies"]["packaging"]).lower()
