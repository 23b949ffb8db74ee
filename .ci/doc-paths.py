#!/usr/bin/env python3
"""Keeps docs/ARCHITECTURE.md true to the tree it maps.

Fails (exit 1, one line per problem) when:
- a path the page names in backticks does not exist: any backticked token that starts with a
  top-level directory of the repository (`crates/...`, `tests/...`, `.ci/...`) or is a file at
  its root (`Dockerfile`); a token may end in `/` for a directory;
- a Markdown link to a relative file does not resolve (from docs/);
- a row of the crate table (the section "Crate map": `| `crate` | layer | what | depends on |`)
  names a crate no Cargo.toml has, or lists other OLM crates (names starting `olm`) than that
  crate's `[dependencies]` (dev-dependencies are not counted; `—` means none).

Usage: python3 .ci/doc-paths.py [REPO_ROOT] [DOC]
"""

import re
import sys
import tomllib
from pathlib import Path

BACKTICK = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def section(text: str, title: str) -> str:
    """The body of the `## title` section ('' when absent)."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return match.group(1) if match else ""


def crates(root: Path) -> dict[str, set[str]]:
    """Package name -> the OLM crates among its [dependencies], for every Cargo.toml with a
    [package] (target directories and hidden directories skipped)."""
    found = {}
    for manifest in root.rglob("Cargo.toml"):
        parts = manifest.relative_to(root).parts
        if any(p == "target" or p.startswith(".") for p in parts):
            continue
        data = tomllib.loads(manifest.read_text())
        package = data.get("package", {}).get("name")
        if package:
            found[package] = {d for d in data.get("dependencies", {}) if d.startswith("olm")}
    return found


def problems(root: Path, doc: Path) -> list[str]:
    text = doc.read_text()
    tops = {p.name for p in root.iterdir() if p.name != "target"}
    out = []
    for token in sorted(set(BACKTICK.findall(text))):
        first = token.split("/", 1)[0]
        if first in tops and ("/" in token or (root / token).is_file()):
            if not (root / token).exists():
                out.append(f"{doc}: names `{token}`, which does not exist")
    for target in sorted(set(LINK.findall(text))):
        if "://" in target:
            continue
        if not (doc.parent / target).exists():
            out.append(f"{doc}: links to {target}, which does not exist")
    known = crates(root)
    for line in section(text, "Crate map").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        name = cells[0].split("`")[1]
        listed = {c.strip().strip("`") for c in cells[-1].split(",")} - {"—", "-", ""}
        if name not in known:
            out.append(f"{doc}: the crate table names {name}, which no Cargo.toml has")
        elif listed != known[name]:
            missing = ", ".join(sorted(known[name] - listed)) or "nothing"
            extra = ", ".join(sorted(listed - known[name])) or "nothing"
            out.append(f"{doc}: {name} depends on {sorted(known[name]) or 'no OLM crate'}; the table leaves out {missing} and adds {extra}")
    return out


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    doc = Path(sys.argv[2]) if len(sys.argv) > 2 else root / "docs/ARCHITECTURE.md"
    found = problems(root, doc)
    for line in found:
        print(line)
    if found:
        return 1
    print(f"{doc.relative_to(root) if doc.is_relative_to(root) else doc}: every path and dependency it names is there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
