#!/usr/bin/env python3
"""check_rooms.py [ROOT] — the layout rules of harness/src (harness/src/README.md):
  - no source file directly in harness/src: every one sits in a room (a folder named for its job);
  - a room holds at most 15 files;
  - the rooms are listed in harness/src/README.md from the bottom up, and a file includes only
    headers of its own room or of rooms listed before it, always by the room's name ("case/case.h");
  - no include circle between modules (a module: the .c and .h of one name in one room).
Exit 0 when all hold; 1 with a line per breach.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_py_imports import strongly_connected  # noqa: E402  (one Tarjan for both checks)

MAX_FILES = 15
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ROOM_ROW = re.compile(r'^\|\s*\d+\s*\|\s*`([a-z0-9_]+)/`')


def room_order(src, problems):
    readme = os.path.join(src, 'README.md')
    if not os.path.exists(readme):
        problems.append('harness/src/README.md: missing (it lists the rooms, bottom up)')
        return []
    with open(readme, encoding='utf-8') as f:
        return [m.group(1) for m in map(ROOM_ROW.match, f) if m]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else '.')
    src = os.path.join(root, 'harness', 'src')
    problems = []
    order = room_order(src, problems)
    rank = {r: i for i, r in enumerate(order)}
    rooms = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for f in sorted(os.listdir(src)):
        if os.path.isfile(os.path.join(src, f)) and f != 'README.md':
            problems.append('harness/src/%s: a file outside the rooms' % f)
    for r in rooms:
        if r not in rank:
            problems.append('harness/src/%s/: a room harness/src/README.md does not list' % r)
    for r in order:
        if r not in rooms:
            problems.append('harness/src/README.md lists a room %s/ that does not exist' % r)
    headers = {}  # basename -> room
    files = []
    for r in rooms:
        names = sorted(os.listdir(os.path.join(src, r)))
        if len(names) > MAX_FILES:
            problems.append('harness/src/%s/: %d files (at most %d)' % (r, len(names), MAX_FILES))
        for n in names:
            if n.endswith('.h'):
                if n in headers:
                    problems.append('harness/src/%s/%s: the same name as in %s/' % (r, n, headers[n]))
                headers[n] = r
            if n.endswith(('.c', '.h')):
                files.append((r, n))
    graph = {}
    for r, n in files:
        rel = 'harness/src/%s/%s' % (r, n)
        mod = '%s/%s' % (r, n.rsplit('.', 1)[0])
        graph.setdefault(mod, set())
        with open(os.path.join(src, r, n), encoding='utf-8') as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            parts = inc.split('/')
            if len(parts) == 1:
                if inc in headers:
                    problems.append('%s: #include "%s": name the room ("%s/%s")' % (rel, inc, headers[inc], inc))
                continue
            if len(parts) != 2 or parts[0] not in rooms:
                continue  # <mixcheck/backend.h> and the like
            ir, ih = parts
            if not os.path.exists(os.path.join(src, ir, ih)):
                problems.append('%s: #include "%s": no such header' % (rel, inc))
                continue
            if ir in rank and r in rank and rank[ir] > rank[r]:
                problems.append('%s: #include "%s": %s/ is above %s/ (harness/src/README.md)' % (rel, inc, ir, r))
            target = '%s/%s' % (ir, ih.rsplit('.', 1)[0])
            if target != mod:
                graph[mod].add(target)
    for scc in (c for c in strongly_connected(graph) if len(c) > 1):
        problems.append('include circle between modules: %s' % ' <-> '.join(scc))
    for p in problems:
        print(p)
    print('check_rooms: %d room(s), %d file(s), %d problem(s)' % (len(rooms), len(files), len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
