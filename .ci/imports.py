#!/usr/bin/env python3
"""The import picture of the production code, checked (.ci/lint imports).

Reads every #include "..." of common/, client/, metrics/ and controller/ and
fails when a folder includes one it may not (the arrows of the README's
layout table, below), or when files include each other in a circle (a file
and its header count as one unit: a.cc -> b.h -> c.h -> a.h is a circle).
Prints the arrows it found, so a review sees the picture.
"""
import os
import re
import sys

# Each folder and the folders it may include; each is its own meson library.
ALLOWED = {
    "common": set(),
    "client": {"common"},
    "metrics": {"common"},
    "controller/reconcile": {"client", "common"},
    "controller/leader": {"client", "common"},
    # The HTTP status table and OpenSSL owners are client/'s (one place each).
    "controller/http": {"client", "common"},
    # The pool model: decoding, validation, node restriction, the decode budget.
    "controller/pool": {"controller/reconcile", "client", "common"},
    "controller/inventory": {
        "controller/http", "controller/pool", "controller/reconcile", "client", "common",
    },
    "controller/pull": {"controller/pool", "controller/reconcile", "client", "common"},
    "controller/ctl": {"client", "common"},
    "controller": {
        "controller/reconcile", "controller/pool", "controller/leader", "controller/http",
        "controller/inventory", "controller/pull",
        "metrics", "client", "common",
    },
}
INCLUDE = re.compile(r'#include "([^"]+)"')


def units(root):
    """Maps each unit (path without extension) to the units it includes."""
    edges = {}
    for top in ("common", "client", "metrics", "controller"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                unit = os.path.splitext(path)[0]
                with open(os.path.join(root, path), errors="replace") as f:
                    for line in f:
                        m = INCLUDE.match(line)
                        if m and os.path.exists(os.path.join(root, m.group(1))):
                            target = os.path.splitext(m.group(1))[0]
                            if target != unit:
                                edges.setdefault(unit, set()).add(target)
    return edges


def circles(edges):
    """The strongly connected groups of more than one unit (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(100000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    edges = units(root)
    arrows = {}
    for unit, targets in edges.items():
        for target in targets:
            a, b = os.path.dirname(unit), os.path.dirname(target)
            if a != b:
                arrows.setdefault(a, {}).setdefault(b, []).append(f"{unit} -> {target}")
    bad = []
    for folder in sorted(arrows):
        allowed = ALLOWED.get(folder)
        if allowed is None:
            bad.append(f"{folder}: a folder the table does not know (add it to .ci/imports.py)")
            continue
        for target in sorted(arrows[folder]):
            if target not in allowed:
                bad.append(f"{folder} may not include {target}: " + arrows[folder][target][0])
        print(f"imports: {folder} -> {', '.join(sorted(arrows[folder]))}")
    for group in circles(edges):
        bad.append("files include each other in a circle: " + " -> ".join(group))
    for line in bad:
        print(f"imports: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
