#!/usr/bin/env python3
"""Tests of .ci/doc-paths.py on small trees it must pass and fail."""

import importlib.util
import tempfile
import unittest
from pathlib import Path

SPEC = importlib.util.spec_from_file_location("doc_paths", Path(__file__).with_name("doc-paths.py"))
doc_paths = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(doc_paths)

PAGE = """# Architecture

See [details](architecture/details.md).

## Crate map

| crate | layer | what | depends on (OLM crates) |
|---|---|---|---|
| `olm-a` | top | uses b | olm-b |
| `olm-b` | bottom | alone | — |

## Where to change what

| to … | change … |
|---|---|
| change a | `crates/olm-a/src/lib.rs`, `crates/olm-a/src/` |
| build | the `Dockerfile`; `src/cli/` is relative to a crate and not checked |
"""


class DocPaths(unittest.TestCase):
    def tree(self, page: str) -> Path:
        root = Path(self.enterContext(tempfile.TemporaryDirectory()))
        for name, deps in [("olm-a", '[dependencies]\nolm-b = { path = "../olm-b" }\n[dev-dependencies]\nolm-c = "1"\n'), ("olm-b", "")]:
            (root / "crates" / name / "src").mkdir(parents=True)
            (root / "crates" / name / "src/lib.rs").write_text("")
            (root / "crates" / name / "Cargo.toml").write_text(f'[package]\nname = "{name}"\n{deps}')
        (root / "Dockerfile").write_text("FROM scratch\n")
        (root / "docs/architecture").mkdir(parents=True)
        (root / "docs/architecture/details.md").write_text("# details\n")
        (root / "docs/ARCHITECTURE.md").write_text(page)
        return root

    def check(self, page: str) -> list[str]:
        root = self.tree(page)
        return doc_paths.problems(root, root / "docs/ARCHITECTURE.md")

    def test_a_true_page_passes(self):
        self.assertEqual(self.check(PAGE), [])

    def test_a_path_that_is_gone_fails(self):
        found = self.check(PAGE.replace("src/lib.rs", "src/gone.rs"))
        self.assertEqual(len(found), 1)
        self.assertIn("`crates/olm-a/src/gone.rs`, which does not exist", found[0])

    def test_a_broken_link_fails(self):
        found = self.check(PAGE.replace("details.md", "moved.md"))
        self.assertEqual(len(found), 1)
        self.assertIn("links to architecture/moved.md", found[0])

    def test_dependencies_that_differ_from_cargo_fail(self):
        found = self.check(PAGE.replace("| uses b | olm-b |", "| uses b | — |"))
        self.assertEqual(len(found), 1)
        self.assertIn("olm-a depends on ['olm-b']; the table leaves out olm-b", found[0])
        # A dev-dependency is not a dependency.
        found = self.check(PAGE.replace("| uses b | olm-b |", "| uses b | olm-b, olm-c |"))
        self.assertEqual(len(found), 1)
        self.assertIn("adds olm-c", found[0])

    def test_a_crate_that_does_not_exist_fails(self):
        found = self.check(PAGE.replace("`olm-b` | bottom", "`olm-z` | bottom"))
        self.assertEqual(found, [f"{found[0].split(':')[0]}: the crate table names olm-z, which no Cargo.toml has"])

    def test_the_repository_s_own_page_passes(self):
        root = Path(__file__).resolve().parent.parent
        self.assertEqual(doc_paths.problems(root, root / "docs/ARCHITECTURE.md"), [])


if __name__ == "__main__":
    unittest.main()
