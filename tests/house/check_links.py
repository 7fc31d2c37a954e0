#!/usr/bin/env python3
"""check_links.py [ROOT] — every relative link of every tracked Markdown file resolves inside the
repository: the file or folder it names exists (below ROOT), and a #fragment names a heading of the
Markdown file it points at (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens,
repeats numbered). Links to a scheme (https:, mailto:) are not followed. Also refused in README.md
and docs/: an absolute path of one machine (/root/, /home/, /work/, /Users/), which a reader's machine
does not have. Exit 0 when all hold; 1 with one line per broken link (file:line: link: why).
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r'(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|'
                  r'!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)')
REF_DEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$')
MACHINE_PATH = re.compile(r'(?<![\w.])/(?:root|home|work|Users)/[\w.-]')
FENCE = re.compile(r'^\s*(```|~~~)')


def tracked_markdown(root):
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '-z', '--cached', '--others',
                              '--exclude-standard', '*.md'], check=True, capture_output=True).stdout
        return sorted(set(p for p in out.decode().split('\0') if p and os.path.exists(os.path.join(root, p))))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith('.') and not x.startswith('build')]
            found += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith('.md')]
        return sorted(found)


def slug(text):
    text = re.sub(r'<[^>]+>', '', text)                 # inline HTML
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)  # links keep their text
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)                 # GitHub keeps letters, digits, _, -, spaces
    return text.replace(' ', '-')


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, out, fenced = {}, set(), False
        with open(path, encoding='utf-8') as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                if fenced:
                    continue
                m = re.match(r'^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$', line)
                if m:
                    s = slug(m.group(2))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    out.add(s if n == 0 else '%s-%d' % (s, n))
                for a in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
                    out.add(a)
        _anchors[path] = out
    return _anchors[path]


def check_file(root, rel, problems):
    path = os.path.join(root, rel)
    here = os.path.dirname(path)
    in_guide = rel == 'README.md' or rel.startswith('docs/')
    fenced = False
    with open(path, encoding='utf-8') as f:
        lines = f.readlines()
    for no, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
        if in_guide and MACHINE_PATH.search(line):
            problems.append('%s:%d: an absolute path of one machine: %s' %
                            (rel, no, MACHINE_PATH.search(line).group(0)))
        if fenced:
            continue
        code_free = re.sub(r'`[^`]*`', '', line)
        targets = [a or b for a, b in LINK.findall(code_free)]
        m = REF_DEF.match(code_free)
        if m:
            targets.append(m.group(1))
        for t in targets:
            if re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', t):
                continue  # https:, mailto:, ...
            target, _, frag = t.partition('#')
            if target.startswith('/'):
                problems.append('%s:%d: %s: an absolute link (write it relative to the file)' % (rel, no, t))
                continue
            dest = os.path.normpath(os.path.join(here, target)) if target else path
            inside = os.path.commonpath([os.path.abspath(root), os.path.abspath(dest)]) == os.path.abspath(root)
            if not inside:
                problems.append('%s:%d: %s: points outside the repository' % (rel, no, t))
                continue
            if not os.path.exists(dest):
                problems.append('%s:%d: %s: no such file' % (rel, no, t))
                continue
            if frag and dest.endswith('.md') and frag not in anchors(dest):
                problems.append('%s:%d: %s: no heading with anchor #%s in %s' %
                                (rel, no, t, frag, os.path.relpath(dest, root)))


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else '.')
    problems = []
    files = tracked_markdown(root)
    for rel in files:
        check_file(root, rel, problems)
    for p in problems:
        print(p)
    print('check_links: %d Markdown file(s), %d problem(s)' % (len(files), len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
