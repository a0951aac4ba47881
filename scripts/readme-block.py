#!/usr/bin/env python3
"""Prints the shell code of the README block marked `<!-- e2e: NAME -->` (the fenced block
right after the marker), so that scripts/e2e-helm.sh runs the README's commands as written.

  readme-block.py README.md NAME     the block's code; exit 1 naming what is missing
  readme-block.py README.md --list   the names of every marked block
"""
import re
import sys


def blocks(text):
    out = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"<!-- e2e: ([a-z0-9-]+) -->", lines[i].strip())
        i += 1
        if not m:
            continue
        name = m.group(1)
        if i >= len(lines) or not lines[i].startswith("```"):
            raise SystemExit(f"readme-block: marker '{name}' is not followed by a fenced block")
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if j >= len(lines):
            raise SystemExit(f"readme-block: block '{name}' is not closed")
        if name in out:
            raise SystemExit(f"readme-block: two blocks named '{name}'")
        out[name] = "\n".join(lines[i + 1:j])
        i = j + 1
    return out


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: readme-block.py README.md NAME|--list")
    with open(sys.argv[1], encoding="utf-8") as f:
        b = blocks(f.read())
    if sys.argv[2] == "--list":
        print("\n".join(b))
        return
    if sys.argv[2] not in b:
        raise SystemExit(f"readme-block: no block '{sys.argv[2]}' in {sys.argv[1]} (have: {', '.join(b)})")
    print(b[sys.argv[2]])


if __name__ == "__main__":
    main()
