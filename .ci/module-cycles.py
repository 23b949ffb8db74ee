#!/usr/bin/env python3
"""Fails when modules of a crate import each other in a cycle, directly or through others.

Every crate under REPO_ROOT (a directory with `src/lib.rs`, `src/main.rs` or `src/bin/*.rs`;
`target/`, `.ci/` and hidden directories are skipped, so the checker's own fixtures are not
checked) is read from its root file along its `mod` declarations. Each source file is a node;
an inline `mod name { … }` is part of its file. A node's edges are the module paths its code
names outside comments:

- `crate::…`, `super::…` (counted from the file's own module: in `a/b.rs` `super::x` is `a::x`,
  a sibling; in `a/mod.rs` it is the parent's `x`; inside an inline module, from that module),
  `self::…`, and paths that start with a child module the file declares (`mod x;` … `x::f()`);
- `use` trees, nested groups included (`use super::{a, b::{c, self}}`), whatever their
  visibility (`pub(crate) use`); `pub(in path)` visibilities are not imports;
- paths written as strings in attributes (`#[schemars(schema_with = "crate::schema::f")]`).

A path names the longest module-file prefix it has. When the next segment is a name that module
only imports (`use`, `pub use`, or a glob `pub use x::*` whose source defines it), the edge goes
to where the name comes from: a parent's re-export of its child does not hide the child.

Not counted as edges:
- a module naming itself, or one of its own ancestors (a parent declares, re-exports and
  dispatches to its children; a child may use what its parent defines);
- a parent's re-export of a descendant (`pub use child::Item`, any `pub(…)`): the re-export is
  followed, so whoever names `parent::Item` gets the edge to the child; the parent's own code
  naming the child (`child::f()`, a private `use`) is an edge;
- test code: a module's test modules and files — any module declared under `#[cfg(test)]`
  (inline `#[cfg(test)] mod tests { … }` or a file `mod tests;`), and any module named `tests`
  or `*_tests` (`tests.rs`, a `tests/` directory, `walk_tests.rs`), with everything below them.
  Test code may import anything of its parent.

A cycle is a strongly connected component of more than one node; each is printed with its files
and the paths that close it. Exit status 1 when there is one.
Usage: module-cycles.py REPO_ROOT (or a crate's directory)"""
import os
import re
import sys
from collections import defaultdict

IDENT = re.compile(r'r#[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*')
PATH_STRING = re.compile(r'(?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+')
CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'\n])'")
RAW_STRING = re.compile(r'(?:br|cr|r)(#*)"')
DEFINES = {'fn', 'struct', 'enum', 'union', 'trait', 'type', 'const', 'static', 'mod', 'macro_rules'}
SKIP_DIRS = {'target', 'node_modules'}


def tokens(text):
    """(kind, value, line) with kind 'id', 'str' or 'p'; comments dropped."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == '\n':
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/*', i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith('/*', i):
                    depth, i = depth + 1, i + 2
                elif text.startswith('*/', i):
                    depth, i = depth - 1, i + 2
                else:
                    line += text[i] == '\n'
                    i += 1
        elif RAW_STRING.match(text, i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = RAW_STRING.match(text, i)
            end = text.find('"' + m.group(1), m.end())
            end = n if end < 0 else end
            out.append(('str', text[m.end():end], line))
            line += text.count('\n', i, end)
            i = end + 1 + len(m.group(1))
        elif c == '"' or (c in 'bc' and text.startswith('"', i + 1)
                          and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_'))):
            j = i + (c != '"') + 1
            start = j
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            out.append(('str', text[start:j], line))
            line += text.count('\n', i, j)
            i = j + 1
        elif c == "'":
            m = CHAR.match(text, i)
            if m:
                i = m.end()
            else:  # a lifetime or label
                i += 1
        elif c.isalpha() or c == '_':
            m = IDENT.match(text, i)
            out.append(('id', m.group(0), line))
            i = m.end()
        elif c.isdigit():
            while i < n and (text[i].isalnum() or text[i] in '_.') and not text.startswith('..', i):
                i += 1
        elif text.startswith('::', i):
            out.append(('p', '::', line))
            i += 2
        else:
            out.append(('p', c, line))
            i += 1
    return out


def matching(toks, i, open_, close):
    """Index of the token closing the bracket opened at toks[i]."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j][1] == open_ and toks[j][0] == 'p':
            depth += 1
        elif toks[j][1] == close and toks[j][0] == 'p':
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def is_test_name(name):
    return name == 'tests' or name.endswith('_tests')


class File:
    """What one source file declares and names."""

    def __init__(self, path, mod, is_test):
        self.path, self.mod, self.is_test = path, mod, is_test
        self.children = []  # (name, is_test, #[path] or None, inline module prefix)
        self.refs = []  # (absolute path, line, text, whether a `pub use`)
        self.bindings = {}  # name -> absolute path, for the file's own `use`s
        self.globs = []  # absolute paths of `use x::*`
        with open(path, encoding='utf-8') as source:
            toks = tokens(source.read())
        self.defs = {b[1] for a, b in zip(toks, toks[1:]) if a[1] in DEFINES and b[0] == 'id'}
        self.parse(toks)

    def resolve(self, segs, scope):
        """The absolute module path of `segs` named in inline module `scope` of this file."""
        segs = [s[2:] if s.startswith('r#') else s for s in segs]
        if segs and segs[-1] == 'self':
            segs = segs[:-1]
        if not segs:
            return None
        here = self.mod + tuple(scope)
        if segs[0] == 'crate':
            return tuple(segs[1:])
        if segs[0] == 'self':
            segs = segs[1:]
        elif segs[0] != 'super':
            return here + tuple(segs) if segs[0] in self.child_names and not scope else None
        ups = 0
        while ups < len(segs) and segs[ups] == 'super':
            ups += 1
        if ups > len(here):
            return None
        return here[:len(here) - ups] + tuple(segs[ups:])

    def use_tree(self, toks, i, prefix, out):
        """Parses one use tree at toks[i]; appends (segments, bound name or '*'); returns the index after it."""
        segs = list(prefix)
        while i < len(toks):
            kind, val, _ = toks[i]
            if kind == 'p' and val == '{':
                end = matching(toks, i, '{', '}')
                j = i + 1
                while j < end:
                    j = self.use_tree(toks, j, segs, out)
                    if j < end and toks[j][1] == ',':
                        j += 1
                return end + 1
            if kind == 'p' and val == '*':
                out.append((segs, '*'))
                return i + 1
            if kind == 'p' and val == '::':
                i += 1
                continue
            if kind != 'id':
                return i
            segs.append(val)
            i += 1
            if i < len(toks) and toks[i][1] == '::':
                continue
            bound = segs[-2] if segs[-1] == 'self' and len(segs) > 1 else segs[-1]
            if i + 1 < len(toks) and toks[i][1] == 'as':
                bound = toks[i + 1][1]
                i += 2
            out.append((segs, bound))
            return i
        return i

    def parse(self, toks):
        # Names of the child modules this file declares at its top (for paths that start with one).
        self.child_names = set()
        depth = 0
        for k, (kind, val, _) in enumerate(toks):
            if kind == 'p' and val == '{':
                depth += 1
            elif kind == 'p' and val == '}':
                depth -= 1
            elif depth == 0 and val == 'mod' and k + 1 < len(toks) and toks[k + 1][0] == 'id':
                self.child_names.add(toks[k + 1][1])
        stack = []  # per open brace: an inline module's name, or None
        pending_test = False
        pending_path = None
        after_pub = False  # the previous token closed a `pub` or `pub(…)`
        i = 0
        while i < len(toks):
            kind, val, line = toks[i]
            public, after_pub = after_pub, False
            nxt = toks[i + 1] if i + 1 < len(toks) else ('', '', 0)
            scope = [s for s in stack if s is not None]
            if kind == 'p' and val == '#':
                j = i + 1 + (nxt[1] == '!')
                if j < len(toks) and toks[j][1] == '[':
                    end = matching(toks, j, '[', ']')
                    attr = toks[j + 1:end]
                    words = [t[1] for t in attr]
                    if words == ['cfg', '(', 'test', ')']:
                        pending_test = True
                    if words[:2] == ['path', '='] and len(attr) == 3 and attr[2][0] == 'str':
                        pending_path = attr[2][1]
                    for t in attr:
                        if t[0] == 'str' and PATH_STRING.fullmatch(t[1]):
                            self.add_ref(self.resolve(t[1].split('::'), scope), t[2], t[1])
                    i = end + 1
                    continue
            if kind == 'p' and val in ';{}':
                if val == '{':
                    stack.append(None)
                elif val == '}' and stack:
                    stack.pop()
                pending_test, pending_path = False, None
                i += 1
                continue
            if kind == 'id' and val == 'mod' and nxt[0] == 'id':
                after = toks[i + 2][1] if i + 2 < len(toks) else ''
                name = nxt[1][2:] if nxt[1].startswith('r#') else nxt[1]
                test = pending_test or is_test_name(name)
                if after == ';':
                    self.children.append((name, test, pending_path, tuple(scope)))
                    i += 3
                elif after == '{':
                    if test:  # test code: not part of the module graph
                        i = matching(toks, i + 2, '{', '}') + 1
                    else:
                        stack.append(name)
                        i += 3
                else:
                    i += 1
                pending_test, pending_path = False, None
                continue
            if kind == 'id' and val == 'pub':
                # pub(crate), pub(in crate::a): not imports
                i = matching(toks, i + 1, '(', ')') + 1 if nxt[1] == '(' else i + 1
                after_pub = True
                continue
            if kind == 'p' and val == '$' and nxt[1] == 'crate':
                i += 2
                continue
            if kind == 'id' and val == 'use' and nxt[1] != '<':
                trees = []
                j = i + 1
                while j < len(toks) and toks[j][1] != ';':
                    k = self.use_tree(toks, j, [], trees)
                    j = k if k > j else j + 1
                for segs, bound in trees:
                    target = self.resolve(segs, scope)
                    shown = segs[:-1] if segs[-1:] == ['self'] else segs
                    self.add_ref(target, line, '::'.join(shown) + ('::*' if bound == '*' else ''), public)
                    if target is not None and not stack:
                        if bound == '*':
                            self.globs.append(target)
                        elif bound != '_':
                            self.bindings[bound] = target
                i = j
                continue
            if kind == 'id' and (val in ('crate', 'super', 'self') or (val in self.child_names and not scope)) \
                    and nxt[1] == '::' and not (i > 0 and toks[i - 1][1] in ('::', '.')):
                segs = [val]
                j = i + 1
                while j + 1 < len(toks) and toks[j][1] == '::' and toks[j + 1][0] == 'id':
                    segs.append(toks[j + 1][1])
                    j += 2
                self.add_ref(self.resolve(segs, scope), line, '::'.join(segs))
                i = j
                continue
            i += 1

    def add_ref(self, target, line, text, reexport=False):
        if target is not None:
            self.refs.append((target, line, text, reexport))


def module_files(src, root_file):
    """Every file of the crate rooted at root_file, by module path, following `mod` declarations."""
    files = {}
    todo = [(root_file, (), False)]
    while todo:
        path, mod, is_test = todo.pop()
        if mod in files or not os.path.isfile(path):
            continue
        f = File(path, mod, is_test)
        files[mod] = f
        base = os.path.basename(path)
        here = os.path.dirname(path)
        child_dir = here if (base in ('mod.rs', 'lib.rs', 'main.rs') or path == root_file) \
            else os.path.join(here, base[:-3])
        for name, test, attr_path, scope in f.children:
            if attr_path is not None:
                candidates = [os.path.join(here if not scope else os.path.join(child_dir, *scope), attr_path)]
            else:
                d = os.path.join(child_dir, *scope)
                candidates = [os.path.join(d, name + '.rs'), os.path.join(d, name, 'mod.rs')]
            found = next((c for c in candidates if os.path.isfile(c)), None)
            if found is None:
                print(f"warning: {os.path.relpath(path)}: no file for `mod {name};`", file=sys.stderr)
                continue
            todo.append((found, mod + scope + (name,), is_test or test))
    return files


def crate_roots(root):
    """(name, root file) of every crate below root."""
    out = []
    for d, dirs, _ in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith('.') and x not in SKIP_DIRS)
        src = os.path.join(d, 'src')
        name = os.path.relpath(d, root)
        name = os.path.basename(os.path.abspath(root)) if name == '.' else name
        for main in ('lib.rs', 'main.rs'):
            if os.path.isfile(os.path.join(src, main)):
                out.append((name if main == 'lib.rs' else name + ' (main.rs)', os.path.join(src, main)))
        bins = os.path.join(src, 'bin')
        if os.path.isdir(bins):
            for fn in sorted(os.listdir(bins)):
                p = os.path.join(bins, fn)
                p = p if fn.endswith('.rs') else os.path.join(p, 'main.rs')
                if os.path.isfile(p):
                    out.append((f'{name} (bin {fn})', p))
    return out


def edges_of(files):
    """node -> {target node: (line, text)} for the crate's non-test files."""

    def target(full, depth=0):
        k = len(full)
        while full[:k] not in files:
            k -= 1
        t = full[:k]
        if k < len(full) and depth < 16:
            name = full[k]
            f = files[t]
            if name in f.bindings:
                return target(f.bindings[name] + full[k + 1:], depth + 1)
            if name not in f.defs:
                for g in f.globs:
                    gt = target(g, depth + 1)
                    if name in files[gt].defs or name in files[gt].bindings:
                        return target(g + full[k:], depth + 1)
        return t

    edges = defaultdict(dict)
    for m, f in files.items():
        if f.is_test:
            continue
        for full, line, text, reexport in f.refs:
            t = target(full)
            if t == m or t == m[:len(t)] or files[t].is_test:
                continue  # itself, an ancestor, test code
            if reexport and t[:len(m)] == m:
                continue  # a re-export of a descendant: who names it through m gets the edge
            edges[m].setdefault(t, (line, text))
    return edges


def cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = 0
    for v0 in nodes:
        if v0 in index:
            continue
        work = [(v0, iter(sorted(edges.get(v0, {}))))]
        index[v0] = low[v0] = counter
        counter += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def check(root):
    """The report's lines, one block per cycle; empty when there is none."""
    lines = []
    for crate, root_file in crate_roots(root):
        files = module_files(os.path.dirname(root_file), root_file)
        edges = edges_of(files)
        for comp in sorted(cycles(sorted(files), edges)):
            members = set(comp)
            lines.append(f"{crate}: cycle of {len(comp)} modules:")
            for m in comp:
                lines.append(f"  {os.path.relpath(files[m].path, root)}")
                for t, (line, text) in sorted(edges[m].items()):
                    if t in members:
                        lines.append(f"    -> {os.path.relpath(files[t].path, root)}"
                                     f"  (line {line}: {text})")
    return lines


def main(argv):
    if len(argv) != 2:
        print(__doc__.splitlines()[-1])
        return 2
    found = check(argv[1])
    if found:
        print("import cycles between modules (move what both sides need below them, "
              "or make one side import the other):")
        print("\n".join(found))
        return 1
    print("no import cycles between modules")
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
