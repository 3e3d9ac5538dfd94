#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The project's include graph, module by module (a .c and its own .h are one
module): prints it layer by layer, lowest first (a layer holds the modules
whose project includes are all in lower layers), then every include cycle.
Exits 1 on a cycle (or an upward include, see --layers), 2 on bad usage.

    tools/include-graph.py [--quiet] [--layers FILE] [ROOT...]   (from the top of the tree)

ROOT folders (default include/leaderd, lib, cmd/leaderd, tests/apiserver)
are read with their sub-folders. A .c's own header is the .h beside it of the
same name or, for a source under lib/, the public header of that name in
include/leaderd/. `#include "x.h"` is looked up next to the including file,
then in every ROOT folder (include/leaderd and lib first, as the compiler's
-I options); system headers and headers outside the roots are left out.
--quiet prints the problems and the last line only.

--layers FILE names layers in order, lowest first, one folder or module (a
path without its extension) per line after its layer's name:

    # comment
    base    lib/base
    base    include/leaderd/err
    daemon  cmd/leaderd

Layers rank in the order their names first appear. A module belongs to the
layer of the longest word matching one of its files; an include from a module
of a lower layer to one of a higher layer is reported and makes the exit
status 1. Modules that match no word are not checked.
"""
import argparse
import os
import re
import sys
from collections import deque

PUBLIC = "include/leaderd"
DEFAULT_ROOTS = [PUBLIC, "lib", "cmd/leaderd", "tests/apiserver"]
# The programs built on the library; each sees only its own headers.
PROGRAMS = ("cmd/leaderd", "tests/apiserver")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def sources(roots):
    """Every .c and .h under the roots, as normalised relative paths."""
    for root in roots:
        for top, dirs, files in os.walk(root):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.normpath(os.path.join(top, f))


def stem(path):
    return os.path.splitext(path)[0]


def modules(files):
    """File -> its module, named after its .c (or the header alone)."""
    lib_c = {}
    for f in files:
        if f.endswith(".c") and f.startswith("lib/"):
            lib_c.setdefault(os.path.basename(stem(f)), []).append(stem(f))
    out = {}
    for f in files:
        m = stem(f)
        if f.endswith(".h") and m + ".c" not in files and f.startswith(PUBLIC + "/"):
            impl = lib_c.get(os.path.basename(m), [])
            m = impl[0] if len(impl) == 1 else m
        out[f] = m
    return out


def program_of(path):
    """The program (of PROGRAMS) a file belongs to, None for the library."""
    return next((p for p in PROGRAMS if path.startswith(p + "/")), None)


def resolve(inc, src, folders, known):
    """The file of known that `#include "inc"` in src names, or None: its own
    folder first, then the library's, then its own program's (a program
    never sees another's headers)."""
    own = program_of(src)
    seen = [d for d in folders if program_of(d + "/x") in (None, own)]
    for d in [os.path.dirname(src)] + seen:
        path = os.path.normpath(os.path.join(d, inc))
        if path in known:
            return path
    return None


def build_graph(roots):
    """Module -> set of the modules it includes (itself left out), and
    module -> the paths of its files without their extension."""
    files = set(sources(roots))
    folders = sorted({os.path.dirname(f) for f in files},
                     key=lambda d: (d != PUBLIC, d != "lib", d))
    mod = modules(files)
    graph = {m: set() for m in mod.values()}
    names = {m: set() for m in mod.values()}
    for src in sorted(files):
        names[mod[src]].add(stem(src))
        with open(src, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = INCLUDE.match(line)
                target = m and resolve(m.group(1), src, folders, files)
                if target and mod[target] != mod[src]:
                    graph[mod[src]].add(mod[target])
    return graph, names


def layers(graph):
    """Modules layer by layer, and those left over (in or above a cycle)."""
    placed, out = set(), []
    left = set(graph)
    while True:
        layer = sorted(m for m in left if graph[m] <= placed)
        if not layer:
            return out, sorted(left)
        out.append(layer)
        placed.update(layer)
        left.difference_update(layer)


def shortest_cycle(graph, start):
    """The shortest path from start back to itself, or None."""
    prev = {start: None}
    queue = deque([start])
    while queue:
        m = queue.popleft()
        for d in sorted(graph[m]):
            if d == start:
                path = [m]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if d not in prev:
                prev[d] = m
                queue.append(d)
    return None


def cycles(graph):
    """The shortest cycle through each module that is on one, each cycle
    once (written from its smallest module)."""
    found = set()
    for m in sorted(graph):
        c = shortest_cycle(graph, m)
        if c:
            ring = c[:-1]
            i = ring.index(min(ring))
            ring = ring[i:] + ring[:i]
            found.add(tuple(ring + [ring[0]]))
    return sorted(found, key=lambda c: (len(c), c))


def read_layers(path):
    """[(layer name, [folder or module, ...]), ...], lowest first."""
    words = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            w = line.split("#", 1)[0].split()
            if len(w) == 1:
                raise ValueError(f"{path}:{n}: expected 'LAYER PATH...'")
            if w:
                words.setdefault(w[0].rstrip(":"), []).extend(map(os.path.normpath, w[1:]))
    return list(words.items())


def layer_of(files, spec):
    """Index in spec of the layer of the longest word matching one of files
    (paths without their extension), or None."""
    best, best_len = None, -1
    for i, (_, words) in enumerate(spec):
        for w in words:
            for f in files:
                if (f == w or f.startswith(w + "/")) and len(w) > best_len:
                    best, best_len = i, len(w)
    return best


def upward(graph, names, spec):
    """Includes from a lower layer to a higher one: (from, to, lo, hi)."""
    out = []
    for m in sorted(graph):
        lo = layer_of(names[m], spec)
        for d in sorted(graph[m]):
            hi = layer_of(names[d], spec)
            if lo is not None and hi is not None and hi > lo:
                out.append((m, d, spec[lo][0], spec[hi][0]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="*", default=DEFAULT_ROOTS)
    ap.add_argument("--layers", metavar="FILE", help="named layers, lowest first")
    ap.add_argument("--quiet", action="store_true",
                    help="print the problems and the last line only")
    args = ap.parse_args()
    for r in args.roots:
        if not os.path.isdir(r):
            ap.error(f"{r}: not a folder")
    try:
        spec = read_layers(args.layers) if args.layers else []
    except (OSError, ValueError) as e:
        ap.error(str(e))
    graph, names = build_graph(args.roots)
    ordered, left = layers(graph)
    if not args.quiet:
        for i, layer in enumerate(ordered):
            print(f"layer {i}: {' '.join(layer)}")
        if left:
            print(f"in or above a cycle: {' '.join(left)}")
    bad = 0
    for c in cycles(graph):
        print("include cycle: " + " -> ".join(c))
        bad += 1
    for m, d, lo, hi in upward(graph, names, spec):
        print(f"upward include: {m} ({lo}) -> {d} ({hi})")
        bad += 1
    print(f"include-graph: {len(graph)} modules, {len(ordered)} layers, "
          f"{bad} problem{'s' if bad != 1 else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
