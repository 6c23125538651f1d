"""Print a bundle's size and its largest parts (the first folder level inside ``_internal/``).

    python packaging/sizes.py dist/pcm-canvas [--top 3] [--json]

Sizes are the bytes of the files (symbolic links count once, as the target they point to inside
the bundle is counted itself), in MB of 10^6 bytes, as ``du --apparent-size -s --si`` shows them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path


def part_sizes(bundle: Path) -> tuple[int, Counter[str]]:
    """Total bytes and bytes per part: each entry of ``_internal/`` (PyInstaller's contents
    folder), and each file next to the executables, named as it sits in the bundle."""
    inner = bundle / "_internal"
    total, parts = 0, Counter()
    for folder, _dirs, files in os.walk(bundle):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            size = path.stat().st_size
            total += size
            rel = path.relative_to(inner if path.is_relative_to(inner) else bundle)
            parts[rel.parts[0] if path.is_relative_to(inner) else str(rel)] += size
    return total, parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.bundle.is_dir():
        print(f"sizes: {args.bundle} is not a folder", file=sys.stderr)
        return 2
    total, parts = part_sizes(args.bundle)
    top = parts.most_common(args.top)
    if args.json:
        print(json.dumps({"total_bytes": total, "largest": [{"part": p, "bytes": b} for p, b in top]}))
        return 0
    print(f"bundle size: {total / 1e6:.0f} MB ({args.bundle})")
    for name, size in top:
        print(f"  {name:<24} {size / 1e6:7.0f} MB  {100 * size / total:4.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
