#!/usr/bin/env python3
"""One row per package from the tables bench/community/run.sh writes (docs/conformance.md).

    bench/community/collate.py [--classes FILE] [--upstream TABLE.md]... TABLE.md...

Tables are read in the order given; a package's row in a later table replaces its row in an
earlier one (a rerun after a fix wins). Every row that is not a success must have a class in
the classes file (default bench/community/classes.tsv: package, class, note, tab-separated):
the script names the rows without one and exits 1, so a table in the docs cannot carry an
unexplained failure. Tables of upstream OLM's runs (`run.sh --upstream`) give the `upstream`
column: what upstream did with the same package on the same cluster kind ("-" where it did not
run). The output is Markdown: the per-package table, then counts by outcome.
"""

import argparse
import re
import sys
from pathlib import Path

# The classes a non-success may have (docs/conformance.md says what each means).
CLASSES = {"olm-rs bug, fixed", "real data", "environment", "as upstream"}
MESSAGE_LIMIT = 240


def cells(line):
    """The cells of a Markdown table row (pipes inside cells were replaced by the suite)."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_rows(path):
    """package -> dict of the row's fields, for every package row of one table."""
    rows = {}
    for line in Path(path).read_text().splitlines():
        if not line.startswith("| ") or line.startswith("| package ") or line.startswith("|---"):
            continue
        fields = cells(line)
        if len(fields) != 8:
            continue
        package, graph, channel, group, start_head, outcome, walked, seconds = fields
        rows[package] = {
            "graph": graph, "channel": channel, "group": group, "head": start_head.split(" → ")[-1],
            "outcome": outcome, "detail": walked, "seconds": seconds, "table": Path(path).name,
        }
    return rows


def short(text):
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def summary(row):
    """(outcome, what the user sees) for the docs' table."""
    outcome = row["outcome"]
    if outcome == "Succeeded at head":
        return "Succeeded", ""
    detail = row["detail"]
    seen = re.match(r"- \(the user sees: (.*)\)$", detail) or re.match(r"- \((.*)\)$", detail)
    message = seen.group(1) if seen else detail
    if outcome.startswith("FAILED"):
        return "failed", short(message)
    if outcome.startswith("not resolvable"):
        return "not resolvable", short(outcome.removeprefix("not resolvable: "))
    return outcome, short(message)


def read_classes(path):
    classes = {}
    if not Path(path).exists():
        return classes
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[1] not in CLASSES:
            sys.exit(f"{path}:{number}: expected 'package<TAB>class<TAB>note' with a class among {sorted(CLASSES)}")
        classes[parts[0]] = (parts[1], parts[2])
    return classes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", default=str(Path(__file__).with_name("classes.tsv")))
    parser.add_argument("--upstream", action="append", default=[], metavar="TABLE", help="a table of upstream OLM's run")
    parser.add_argument("tables", nargs="+")
    args = parser.parse_args()
    rows, upstream = {}, {}
    for table in args.tables:
        rows.update(read_rows(table))
    for table in args.upstream:
        upstream.update(read_rows(table))
    classes = read_classes(args.classes)
    out = ["| package | channel | group | head | outcome | class | what the user sees | s | upstream |", "|---|---|---|---|---|---|---|---|---|"]
    counts, unclassified = {}, []
    for package in sorted(rows):
        row = rows[package]
        outcome, seen = summary(row)
        klass, note = classes.get(package, ("", ""))
        if outcome != "Succeeded" and not klass:
            unclassified.append(f"{package} ({outcome}, {row['table']})")
        if note:
            seen = f"{seen} — {note}" if seen else note
        counts[outcome] = counts.get(outcome, 0) + 1
        theirs = "-"
        if package in upstream:
            their_outcome, their_seen = summary(upstream[package])
            theirs = f"{their_outcome}: {their_seen}" if their_seen and their_outcome != "not served" else their_outcome
        out.append(f"| {package} | {row['channel']} | {row['group']} | {row['head']} | {outcome} | {klass} | {seen} | {row['seconds']} | {theirs} |")
    out.append("")
    out.append(", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items(), key=lambda kv: -kv[1])) + f"; {len(rows)} packages.")
    print("\n".join(out))
    if unclassified:
        print("collate.py: rows that are not a success and have no class in " + args.classes + ":\n  " + "\n  ".join(unclassified), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
