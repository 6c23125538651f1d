#!/usr/bin/env bash
# Build a .deb from the PyInstaller bundle (run packaging/build.sh first):
#
#   bash packaging/build_deb.sh        -> dist/<folder>_<version>_<arch>.deb
#
# Layout: the bundle in /opt/<folder>/, /usr/bin/<gui> and /usr/bin/<cli> as symbolic links to
# it, a desktop entry (offered for PCM Canvas sessions only: a MIME type of its own, recognised by
# content; exported sessions open with `pcm-canvas FILE`) and the icon in the hicolor theme. Nothing runs at install time; dpkg's triggers refresh the
# desktop and icon caches. Names: packaging/bundle.ini.
# Environment: PCM_DEB_COMPRESSION (default gzip: fast on 2 cores; xz gives a smaller file).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source packaging/names.sh
BUNDLE="dist/$BUNDLE_FOLDER"
[ -x "$BUNDLE/$BUNDLE_GUI" ] || { echo "build_deb: no bundle at $BUNDLE: run bash packaging/build.sh first" >&2; exit 1; }
command -v dpkg-deb >/dev/null || { echo "build_deb: needs dpkg-deb (Debian/Ubuntu)" >&2; exit 1; }

ARCH=$(dpkg --print-architecture)
PKG="$BUNDLE_FOLDER"
DEB="dist/${PKG}_${BUNDLE_VERSION}_${ARCH}.deb"
ROOT="build/deb/${PKG}"
rm -rf "$ROOT" && mkdir -p "$ROOT/DEBIAN" "$ROOT/opt" "$ROOT/usr/bin" "$ROOT/usr/share/applications" \
  "$ROOT/usr/share/icons/hicolor/256x256/apps" "$ROOT/usr/share/icons/hicolor/scalable/apps" \
  "$ROOT/usr/share/doc/$PKG"

# The bundle, as hard links when dist/ and build/ share a file system (1.5 GB, no copy needed).
cp -al "$BUNDLE" "$ROOT/opt/$PKG" 2>/dev/null || cp -a "$BUNDLE" "$ROOT/opt/$PKG"
ln -s "/opt/$PKG/$BUNDLE_GUI" "$ROOT/usr/bin/$BUNDLE_GUI"
ln -s "/opt/$PKG/$BUNDLE_CLI" "$ROOT/usr/bin/$BUNDLE_CLI"
cp "$BUNDLE_ICON" "$ROOT/usr/share/icons/hicolor/256x256/apps/$PKG.png"
cp "${BUNDLE_ICON%.png}.svg" "$ROOT/usr/share/icons/hicolor/scalable/apps/$PKG.svg"
cat > "$ROOT/usr/share/applications/$PKG.desktop" <<DESKTOP
[Desktop Entry]
Type=Application
Name=$BUNDLE_APP_NAME
GenericName=Branching LLM canvas
Comment=Long, branching work with a local LLM, fully offline
Exec=$BUNDLE_GUI %f
Icon=$PKG
Terminal=false
Categories=Office;
MimeType=$BUNDLE_MIME;
StartupWMClass=$BUNDLE_WM_CLASS
Keywords=LLM;chat;context;canvas;
DESKTOP
# The exported-session type: a JSON document that starts with its "schema_version" (what
# File > Export and `pcm export` write), recognised by content, so other JSON files stay with
# their own applications. dpkg's trigger runs update-mime-database.
mkdir -p "$ROOT/usr/share/mime/packages"
cat > "$ROOT/usr/share/mime/packages/$PKG.xml" <<MIME
<?xml version="1.0" encoding="UTF-8"?>
<mime-info xmlns="http://www.freedesktop.org/standards/shared-mime-info">
  <mime-type type="$BUNDLE_MIME">
    <comment>$BUNDLE_APP_NAME session</comment>
    <sub-class-of type="application/json"/>
    <generic-icon name="$PKG"/>
    <magic priority="60">
      <match type="string" value="&quot;schema_version&quot;" offset="0:16"/>
    </magic>
  </mime-type>
</mime-info>
MIME
cat > "$ROOT/usr/share/doc/$PKG/copyright" <<COPYRIGHT
$BUNDLE_APP_NAME $BUNDLE_VERSION: Apache-2.0. Bundled models: SmolLM2-135M-Instruct (Apache-2.0),
all-MiniLM-L6-v2 (Apache-2.0). Bundled libraries keep their own licences (Qt/PySide6: LGPLv3,
PyTorch: BSD-3-Clause, llama.cpp: MIT, LanceDB and Apache Arrow: Apache-2.0); their licence files
are inside /opt/$PKG/_internal/*.dist-info.
COPYRIGHT

# glibc: the newest symbol version any bundled binary needs (the build machine's glibc or older).
# (objdump fails on the non-ELF files among them: its status is not the answer)
GLIBC=$({ find "$ROOT/opt/$PKG" -type f \( -name '*.so*' -o -perm -u+x \) -exec objdump -T {} + 2>/dev/null || true; } \
  | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | cut -d_ -f2 || true)
SIZE=$(du -sk --apparent-size "$ROOT" | cut -f1)
# The xcb platform plugin's X11 libraries come from the system (Qt's documented list); OpenGL,
# fontconfig and D-Bus too. The offscreen platform needs none of them.
cat > "$ROOT/DEBIAN/control" <<CONTROL
Package: $PKG
Version: $BUNDLE_VERSION
Architecture: $ARCH
Maintainer: $BUNDLE_PUBLISHER <noreply@localhost>
Installed-Size: $SIZE
Depends: libc6 (>= ${GLIBC:-2.31}), libgl1, libegl1, libfontconfig1, libdbus-1-3, libx11-6, libx11-xcb1, libxcb1, libxkbcommon0, libxkbcommon-x11-0, libxcb-cursor0, libxcb-icccm4, libxcb-image0, libxcb-keysyms1, libxcb-randr0, libxcb-render-util0, libxcb-shape0, libxcb-xinerama0, libxcb-xkb1
Section: utils
Priority: optional
Homepage: https://localhost/pcm-canvas
Description: offline desktop canvas for long, branching work with a local LLM
 PCM Canvas plans, routes and compiles a budgeted context for every input, on a
 session task graph drawn as a canvas. Everything runs on this machine: the
 default chat model (SmolLM2-135M-Instruct) and embedder (all-MiniLM-L6-v2) are
 included. Also installs the \`pcm\` command line (pcm ask, pcm mcp, ...).
CONTROL

dpkg-deb --root-owner-group -Z"${PCM_DEB_COMPRESSION:-gzip}" --build "$ROOT" "$DEB" >/dev/null
rm -rf "$ROOT"
echo "$DEB ($(du -h --apparent-size "$DEB" | cut -f1))"
