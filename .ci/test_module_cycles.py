#!/usr/bin/env python3
"""Unit test of .ci/module-cycles.py: the fixture crates in .ci/fixtures/ (one with a sibling
`super::` cycle, which must fail; one acyclic, which must pass) and small trees written here for
each rule of the checker. Plain unittest: `python3 .ci/test_module_cycles.py`."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, 'module-cycles.py')
FIXTURES = os.path.join(HERE, 'fixtures')

spec = importlib.util.spec_from_file_location('module_cycles', SCRIPT)
module_cycles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module_cycles)


def run(root):
    """The checker run as CI runs it: (exit status, output)."""
    p = subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class Fixtures(unittest.TestCase):
    def test_sibling_super_cycle_fails(self):
        status, out = run(os.path.join(FIXTURES, 'cycle'))
        self.assertEqual(status, 1, out)
        self.assertIn('src/a/x.rs', out)
        self.assertIn('src/a/y.rs', out)
        self.assertIn('super::y::Foo', out)
        self.assertIn('super::x::Bar', out)

    def test_acyclic_passes(self):
        status, out = run(os.path.join(FIXTURES, 'acyclic'))
        self.assertEqual(status, 0, out)
        self.assertIn('no import cycles', out)

    def test_the_repository_check_skips_the_fixtures(self):
        with tempfile.TemporaryDirectory() as root:
            os.symlink(FIXTURES, os.path.join(root, '.ci'))
            self.assertEqual(module_cycles.crate_roots(root), [])


class Rules(unittest.TestCase):
    """Each test writes a crate (file -> text) and returns the checker's cycles as sets of files."""

    def cycles(self, files):
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                full = os.path.join(root, 'src', path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, 'w') as f:
                    f.write(textwrap.dedent(text))
            (_, root_file), = module_cycles.crate_roots(root)
            found = module_cycles.module_files(os.path.dirname(root_file), root_file)
            edges = module_cycles.edges_of(found)
            return [{os.path.relpath(found[m].path, os.path.join(root, 'src')) for m in comp}
                    for comp in module_cycles.cycles(sorted(found), edges)]

    def test_super_in_a_mod_rs_names_the_parents_module(self):
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a; mod b;',
            'a/mod.rs': 'mod x; use super::b::Z; pub struct W;',
            'a/x.rs': '',
            'b.rs': 'use crate::a::W; pub struct Z;',
        }), [{'a/mod.rs', 'b.rs'}])

    def test_a_cycle_of_three_through_nested_groups(self):
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a;',
            'a/mod.rs': 'mod x; mod y; mod z;',
            'a/x.rs': 'use super::{y::{self, Foo}}; pub struct Bar;',
            'a/y.rs': 'pub(crate) use super::z::Baz as Renamed; pub struct Foo;',
            'a/z.rs': 'pub struct Baz; fn f() -> crate::a::x::Bar { crate::a::x::Bar }',
        }), [{'a/x.rs', 'a/y.rs', 'a/z.rs'}])

    def test_a_parent_re_export_leads_to_the_child(self):
        # b names `crate::a::Bar`, which a/mod.rs only re-exports from x: the edge is b -> x.
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a; mod b;',
            'a/mod.rs': 'mod x; pub(crate) use self::x::Bar; pub fn run() { crate::b::go() }',
            'a/x.rs': 'pub struct Bar; pub fn f() { crate::b::go() }',
            'b.rs': 'pub fn go() { let _ = crate::a::Bar; }',
        }), [{'a/x.rs', 'b.rs'}])

    def test_a_parents_re_export_of_its_child_is_not_an_edge_of_the_parent(self):
        files = {
            'lib.rs': 'mod a; mod b;',
            'a/mod.rs': 'mod x; pub use x::X; pub(crate) use self::x::{f}; pub const NAME: &str = "a";',
            'a/x.rs': 'pub struct X(crate::b::B); pub fn f() {}',
            'b.rs': 'pub struct B; pub const N: &str = crate::a::NAME;',
        }
        self.assertEqual(self.cycles(files), [])
        # The parent's own code naming its child is an edge.
        files['a/mod.rs'] += ' pub fn run() { x::f() }'
        self.assertEqual(self.cycles(files), [{'a/mod.rs', 'a/x.rs', 'b.rs'}])
        files['a/mod.rs'] = 'mod x; use x::X; pub const NAME: &str = "a";'
        self.assertEqual(self.cycles(files), [{'a/mod.rs', 'a/x.rs', 'b.rs'}])

    def test_a_glob_re_export_leads_to_the_child_that_defines_the_name(self):
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a; mod b;',
            'a/mod.rs': 'mod x; mod y; pub use x::*; pub use y::*;',
            'a/x.rs': 'pub struct Bar;',
            'a/y.rs': 'pub struct Foo; use crate::b::Baz;',
            'b.rs': 'pub struct Baz; use crate::a::Foo;',
        }), [{'a/y.rs', 'b.rs'}])

    def test_a_path_through_a_child_module_the_file_declares(self):
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a; mod b;',
            'a.rs': 'mod x; pub struct W; pub fn f() { x::g() }',
            'a/x.rs': 'pub fn g() { crate::b::h() }',
            'b.rs': 'pub fn h() { let _ = crate::a::W; }',
        }), [{'a.rs', 'a/x.rs', 'b.rs'}])

    def test_an_inline_module_counts_from_itself(self):
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a;',
            'a/mod.rs': 'mod x; mod y;',
            'a/x.rs': 'pub struct Bar; mod inner { use super::super::y::Foo; }',
            'a/y.rs': 'pub struct Foo; fn f() { let _ = self::super::x::Bar; }',
        }), [{'a/x.rs', 'a/y.rs'}])

    def test_a_path_written_in_an_attribute_string(self):
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a; mod b;',
            'a.rs': '#[serde(with = "crate::b::f")] pub struct A;',
            'b.rs': 'pub fn f() {} pub struct B(crate::a::A);',
        }), [{'a.rs', 'b.rs'}])

    def test_a_child_naming_its_ancestors_is_not_an_edge(self):
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a; pub struct Root;',
            'a/mod.rs': 'mod x; pub struct Shared; pub fn run() { x::f() }',
            'a/x.rs': 'use super::Shared; use crate::Root; pub fn f() {}',
        }), [])

    def test_test_code_is_not_an_edge(self):
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a;',
            'a/mod.rs': 'mod x; mod y;',
            'a/x.rs': 'use super::y::Foo; pub struct Bar;',
            'a/y.rs': '''
                pub struct Foo;
                #[cfg(test)]
                mod tests { use super::super::x::Bar; }
                #[cfg(test)]
                #[path = "y_tests.rs"]
                mod more;
                mod semver_tests { use crate::a::x::Bar; }
                #[cfg(test)]
                mod helpers;
            ''',
            'a/y_tests.rs': 'use super::super::x::Bar;',
            'a/y/helpers.rs': 'use crate::a::x::Bar;',
        }), [])
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a;',
            'a/mod.rs': 'mod x; mod y; #[cfg(test)] mod tests;',
            'a/x.rs': 'use super::y::Foo; pub struct Bar;',
            'a/y.rs': 'pub struct Foo; mod tests;',
            'a/y/tests/mod.rs': 'mod deep;',
            'a/y/tests/deep.rs': 'use crate::a::x::Bar;',
            'a/tests.rs': 'use super::{x::Bar, y::Foo};',
        }), [])

    def test_comments_strings_and_visibilities_are_not_edges(self):
        self.assertEqual(self.cycles({
            'lib.rs': 'mod a;',
            'a/mod.rs': 'mod x; mod y;',
            'a/x.rs': 'use super::y::Foo; pub struct Bar;',
            'a/y.rs': '''
                // use super::x::Bar;
                /* super::x::Bar /* nested */ crate::a::x::Bar */
                /// [`super::x::Bar`]
                pub struct Foo;
                pub(in crate::a) fn f() -> &'static str { "super::x::Bar" }
                pub const C: char = '"'; pub const D: &str = r#"crate::a::x::Bar"#;
                macro_rules! m { () => { $crate::a::x::Bar } }
            ''',
        }), [])


if __name__ == '__main__':
    unittest.main()
