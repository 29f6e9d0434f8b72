#!/usr/bin/env python3
"""scripts/measure-functions.py: the longest C functions, by lines.

    python3 scripts/measure-functions.py [-n N] [DIR...]

Prints the N longest function definitions (default 10) in the .c files
under DIR (default controller, core, providers), longest first: lines from
the first line of the signature to the closing brace, both counted.  A
measuring tool, not a test.  It reads the house layout (STYLE.md): a
definition's signature starts in column 0 and its braces stand alone in
column 0, so a column-0 "{" after a signature opens a function and the
next column-0 "}" closes it.
"""
import argparse
import os
import re
import sys

SIG = re.compile(r'^[A-Za-z_][A-Za-z0-9_ \t\*]*\b([A-Za-z_][A-Za-z0-9_]*)\s*\(')


def functions(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().split('\n')
    out = []
    sig_at, name = None, None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = SIG.match(line)
        if m and not line.rstrip().endswith(';') and not line.startswith('typedef'):
            sig_at, name = i, m.group(1)
        elif line.startswith('{') and sig_at is not None:
            j = i + 1
            while j < len(lines) and not lines[j].startswith('}'):
                j += 1
            out.append((j - sig_at + 1, name, sig_at + 1))
            sig_at, name = None, None
            i = j
        elif line.rstrip().endswith(';') and not line.startswith((' ', '\t')):
            sig_at = None
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('-n', type=int, default=10)
    ap.add_argument('dirs', nargs='*')
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = a.dirs or [os.path.join(root, d) for d in ('controller', 'core', 'providers')]
    rows = []
    for d in dirs:
        for base, _, files in os.walk(d):
            for fn in files:
                if fn.endswith('.c'):
                    p = os.path.join(base, fn)
                    for n, name, at in functions(p):
                        rows.append((n, name, os.path.relpath(p, root), at))
    rows.sort(key=lambda r: (-r[0], r[2], r[3]))
    print('| lines | function | file:line |')
    print('|---:|---|---|')
    for n, name, path, at in rows[:a.n]:
        print(f'| {n} | {name} | {path}:{at} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
