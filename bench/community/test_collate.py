#!/usr/bin/env python3
"""Tests of bench/community/collate.py on small tables it must merge, and refuse."""

import importlib.util
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).with_name("collate.py")
SPEC = importlib.util.spec_from_file_location("collate", SCRIPT)
collate = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(collate)

HEADER = "OLM under test: olm-rs\n\n| package | graph | channel | group | start → head | outcome | upgrades walked | seconds |\n|---|---|---|---|---|---|---|---|\n"
FIRST = HEADER + (
    "| alpha | - | stable | AllNamespaces | 1.0.0 → 1.0.0 | Succeeded at head | 0: 1.0.0 | 5.0 |\n"
    "| beta | - | stable | OwnNamespace | 2.0.0 → 2.0.0 | FAILED: timed out after 300s --- dump | - (the user sees: CSV beta.v2.0.0 Failed InstallCheckFailed: 0 of 1 updated replicas are available) | 301.0 |\n"
    "| gamma | - | - | - | - | not served | - (catalog.json: stranded entries) | - |\n"
)
RERUN = HEADER + "| beta | - | stable | OwnNamespace | 2.0.0 → 2.0.0 | Succeeded at head | 0: 2.0.0 | 9.0 |\n"


class CollateTest(unittest.TestCase):
    def run_collate(self, tables, classes):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for i, text in enumerate(tables):
                path = Path(tmp, f"t{i}.md")
                path.write_text(text)
                paths.append(str(path))
            classes_path = Path(tmp, "classes.tsv")
            classes_path.write_text(classes)
            return subprocess.run([sys.executable, str(SCRIPT), "--classes", str(classes_path), *paths], capture_output=True, text=True)

    def test_a_failure_without_a_class_is_refused_and_named(self):
        result = self.run_collate([FIRST], "gamma\treal data\tstranded entries\n")
        self.assertEqual(result.returncode, 1)
        self.assertIn("beta (failed", result.stderr)
        self.assertNotIn("gamma (", result.stderr)

    def test_a_later_table_replaces_a_package_row_and_classes_explain_the_rest(self):
        result = self.run_collate([FIRST, RERUN], "gamma\treal data\tstranded entries\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("| beta | stable | OwnNamespace | 2.0.0 | Succeeded |  |  | 9.0 | - |", result.stdout)
        self.assertIn("| gamma | - | - | - | not served | real data | catalog.json: stranded entries — stranded entries | - | - |", result.stdout)
        self.assertIn("2 Succeeded, 1 not served; 3 packages.", result.stdout)

    def test_upstreams_run_fills_its_column(self):
        with tempfile.TemporaryDirectory() as tmp:
            theirs = Path(tmp, "upstream.md")
            theirs.write_text(FIRST.replace("olm-rs", "upstream"))
            classes = Path(tmp, "classes.tsv")
            classes.write_text("gamma\treal data\tx\n")
            ours = Path(tmp, "ours.md")
            ours.write_text(RERUN)
            result = subprocess.run([sys.executable, str(SCRIPT), "--classes", str(classes), "--upstream", str(theirs), str(ours)], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("| 9.0 | failed: CSV beta.v2.0.0 Failed InstallCheckFailed: 0 of 1 updated replicas are available |", result.stdout)

    def test_an_unknown_class_is_refused(self):
        result = self.run_collate([FIRST], "beta\tbad luck\tx\n")
        self.assertEqual(result.returncode, 1)
        self.assertIn("expected 'package<TAB>class<TAB>note'", result.stderr)

    def test_a_long_message_is_cut(self):
        self.assertEqual(len(collate.short("x" * 1000)), collate.MESSAGE_LIMIT)


if __name__ == "__main__":
    unittest.main()
