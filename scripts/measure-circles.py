#!/usr/bin/env python3
"""scripts/measure-circles.py: circles between source files.

    python3 scripts/measure-circles.py [BUILD_DIR]

Prints the include circles (a header that reaches itself through the
#include "..." lines of the headers it includes) in controller/, core/
and providers/, and, given a build folder, the call circles between the
.c files of each library: file A calls B when A's object file uses a
symbol B's defines (nm), and a circle is a set of files that call each
other round (a strongly connected component of two or more files).  A
measuring tool, not a test; 0 and 0 is the target.
"""
import os
import re
import subprocess
import sys

INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def sccs(graph):
    """Tarjan's strongly connected components of two or more nodes."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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

    sys.setrecursionlimit(100000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def include_circles(root):
    graph = {}
    for top in ('controller', 'core', 'providers'):
        for base, _, files in os.walk(os.path.join(root, top)):
            for fn in files:
                if not fn.endswith(('.c', '.h')):
                    continue
                p = os.path.relpath(os.path.join(base, fn), root)
                with open(os.path.join(root, p), encoding='utf-8', errors='replace') as f:
                    graph[p] = [m.group(1) for m in map(INC.match, f) if m]
    return sccs(graph)


def call_circles(build):
    """Per library (folder of object files), the call circles between its .c files."""
    out = []
    for base, _, files in os.walk(build):
        objs = [os.path.join(base, f) for f in files if f.endswith('.c.o')]
        if len(objs) < 2:
            continue
        defs, uses = {}, {}
        for o in objs:
            name = os.path.basename(o)[:-2]
            res = subprocess.run(['nm', o], capture_output=True, text=True, check=False)
            uses[name] = set()
            for line in res.stdout.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in 'TDBR':
                    defs[parts[2]] = name
                elif len(parts) == 2 and parts[0] == 'U':
                    uses[name].add(parts[1])
        graph = {a: sorted({defs[s] for s in u if s in defs and defs[s] != a}) for a, u in uses.items()}
        lib = os.path.relpath(base, build)
        out += [(lib, c) for c in sccs(graph)]
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    inc = include_circles(root)
    print(f'include circles: {len(inc)}')
    for c in inc:
        print('  ' + ' -> '.join(c))
    if len(sys.argv) > 1:
        calls = call_circles(sys.argv[1])
        print(f'call circles: {len(calls)}')
        for lib, c in calls:
            print(f'  {lib}: ' + ', '.join(c))
    return 0


if __name__ == '__main__':
    sys.exit(main())
