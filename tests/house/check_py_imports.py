#!/usr/bin/python3
"""check_py_imports.py DIR: the Python modules of DIR (golden/) import each other without a cycle.

Parses every DIR/*.py with `ast` (nothing is imported or run) and builds the graph of imports among those
modules: `import X`, `import X as Y`, `import X.Y`, `from X import ...` and `from X.Y import ...`, wherever
they sit (module level, inside a function, a class, a try or an if), plus importlib.import_module("X") and
__import__("X") with a literal name. Only names of modules in DIR count (numpy, h5py, ... are not nodes).
Exit 0 when the graph is a DAG; 1 naming one cycle per strongly connected component, with the file:line of
each import on it; 2 on a usage error or a file that does not parse.
"""

import ast
import os
import sys


def imported_names(tree):
    """(module name, line) of every import in the tree, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.module.split(".")[0], node.lineno
            elif node.level > 0 and not node.module:   # from . import X: X is a sibling module
                for alias in node.names:
                    yield alias.name, node.lineno
            elif node.level > 0:
                yield node.module.split(".")[0], node.lineno
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in ("import_module", "__import__"):
                yield node.args[0].value.split(".")[0], node.lineno


def import_graph(folder):
    """{module: {imported module: first line}} over the *.py files of folder."""
    files = sorted(f for f in os.listdir(folder) if f.endswith(".py"))
    modules = {f[:-3] for f in files}
    graph = {}
    for f in files:
        path = os.path.join(folder, f)
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename=path)
        edges = {}
        for name, line in imported_names(tree):
            if name in modules:
                edges.setdefault(name, line)
        graph[f[:-3]] = edges
    return graph


def strongly_connected(graph):
    """Tarjan's strongly connected components (iterative), each a list of modules."""
    index, low, on_stack, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    comps.append(sorted(comp))
    return comps


def cycle_in(graph, comp):
    """One shortest cycle through the component's first module, as a list of modules (first == last)."""
    members, start = set(comp), comp[0]
    prev, frontier = {}, [start]
    while frontier:                      # breadth-first inside the component, back to start
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in its component {comp}")


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: check_py_imports.py DIR (the folder of the Python modules, e.g. golden)", file=sys.stderr)
        return 2
    folder = argv[0]
    try:
        graph = import_graph(folder)
    except (OSError, SyntaxError, UnicodeDecodeError) as e:
        print(f"check_py_imports: {e}", file=sys.stderr)
        return 2
    comps = [c for c in strongly_connected(graph) if len(c) > 1 or c[0] in graph[c[0]]]
    if not comps:
        edges = sum(len(e) for e in graph.values())
        print(f"{folder}: {len(graph)} modules, {edges} imports among them, no import cycle")
        return 0
    for comp in comps:
        cyc = cycle_in(graph, comp)
        more = f" (one cycle of several among {', '.join(comp)})" if len(comp) > len(cyc) - 1 else ""
        print(f"{folder}: import cycle: {' -> '.join(cyc)}{more}")
        for a, b in zip(cyc[:-1], cyc[1:]):
            print(f"  {os.path.join(folder, a + '.py')}:{graph[a][b]}: imports {b}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
