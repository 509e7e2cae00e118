#!/usr/bin/env python3
"""The import drawing of a Rust source tree, in numbers: top-level modules, files, the edges
between them (`crate::`, `super::`, `self::` paths outside comments and `#[cfg(test)]` items)
and the cycles among them. tests/it/layers.rs is what holds the layering; this prints the
before/after figures for a note.

usage: python3 scripts/imports.py [SRC_DIR]   (default: src)
"""
import collections
import os
import re
import sys


def code_of(text):
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        if lines[i].strip() == "#[cfg(test)]":
            depth, opened, i = 0, False, i + 1
            while i < len(lines):
                c = lines[i].split("//")[0]
                depth += c.count("{") - c.count("}")
                opened |= "{" in c
                i += 1
                if (opened and depth <= 0) or (not opened and c.rstrip().endswith(";")):
                    break
            continue
        out.append(lines[i].split("//")[0])
        i += 1
    return "\n".join(out)


def module_of(rel):
    parts = rel[:-3].split(os.sep)
    return parts[:-1] if parts[-1] == "mod" else parts


def cycles(nodes, edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
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

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main(root):
    files = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), root)
            if f.endswith(".rs") and rel not in ("lib.rs", "main.rs"):
                files[rel] = code_of(open(os.path.join(root, rel)).read())
    by_module = {tuple(module_of(r)): r for r in files}

    def resolve(path):
        for k in range(len(path), 0, -1):
            if tuple(path[:k]) in by_module:
                return by_module[tuple(path[:k])]

    module_edges, file_edges = collections.defaultdict(set), collections.defaultdict(set)
    for rel, code in files.items():
        me = module_of(rel)
        for prefix, base in (("crate::", []), ("super::", me[:-1]), ("self::", me)):
            for m in re.finditer(r"(?<![\w$])" + prefix + r"((?:\w+::)*\w+)(!?)", code):
                if m.group(2):
                    continue  # a macro at the crate's root
                path = base + m.group(1).split("::")
                if prefix == "crate::" and path[0] != me[0]:
                    module_edges[me[0]].add(path[0])
                target = resolve(path)
                if target and target != rel:
                    file_edges[rel].add(target)
    modules = {module_of(r)[0] for r in files}
    print(f"top-level modules {len(modules)}, edges {sum(map(len, module_edges.values()))}, "
          f"cycles {cycles(sorted(modules), module_edges)}")
    print(f"files {len(files)}, edges {sum(map(len, file_edges.values()))}, "
          f"cycles {[len(c) for c in cycles(sorted(files), file_edges)]}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "src")
