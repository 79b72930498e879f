"""The import scan: the library's rooms stay rooms (docs/architecture.md).

    python tools/import_scan.py [--root src/themis] [--graph]

Reads every ``import`` line of the package (module level, inside functions and under
``TYPE_CHECKING`` alike: a dependency deferred to run time or to the type checker is
still a dependency) and fails, naming file and line, on:

- a cycle between modules (``a`` imports ``b``, which imports ``a``, however far round);
- a cycle between packages (``model`` imports ``fairness``, which imports ``model``),
  where a package is a direct subpackage of the root and a module directly in the root
  (``errors.py``) or an entry point (a ``__main__`` module, which nothing imports) is its
  own node;
- an import of another package's private module or private name (one starting with
  ``_``: ``from themis.runtime.x import _helper``), which is that package's business alone;
- an import against the order of a package's rooms: a package that declares
  ``__rooms__ = ("low", ..., "high")`` in its ``__init__.py`` lets a module of one room
  import only its own room and the rooms before it, and no room import a module that lies
  directly in the package (its composition root, which imports the rooms).

Exit 0 and a one-line summary when the tree keeps all three (``--graph`` also prints each
package's dependencies, lowest first); exit 1 with every finding otherwise. The test suite
runs it (``tests/test_import_scan.py``), so CI does. Only the standard library: the scan
must run before anything is installed.
"""

from __future__ import annotations

import argparse
import ast
import sys
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    """One import of a module of the scanned package."""

    source: str  # the importing module
    target: str  # the imported module (the longest module prefix of what is named)
    path: Path
    line: int
    name: str | None = None  # ``from target import name`` of a name that is no module


def modules(root: Path) -> dict[str, Path]:
    """Every module under ``root`` by dotted name (``themis.model.state``); a package by its
    own name (its ``__init__.py``)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module a (possibly relative) ``from`` import names."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str, known: Mapping[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a known module (None: not ours)."""
    while name not in known:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name


def imports(known: Mapping[str, Path]) -> list[Import]:
    """Every import, anywhere in a module, of a module in ``known``."""
    found: list[Import] = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            named: list[str] = []
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, node, is_package)
                # ``from themis.model import state`` imports the module ``state``.
                named = [f"{base}.{alias.name}" for alias in node.names]
            for name in named:
                target = _owner(name, known)
                if target is not None and target != module:
                    what = None if name == target else name[len(target) + 1 :]
                    found.append(Import(module, target, path, node.lineno, what))
    return found


def declared_rooms(known: Mapping[str, Path]) -> dict[str, tuple[str, ...]]:
    """Each package's ``__rooms__`` (lowest first), read from its ``__init__.py``."""
    found: dict[str, tuple[str, ...]] = {}
    for module, path in known.items():
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__rooms__" for t in node.targets)
                and isinstance(node.value, (ast.Tuple, ast.List))
            ):
                found[module] = tuple(ast.literal_eval(node.value))
    return found


def room_order_findings(edges: Iterable[Import], rooms: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Imports against a package's declared room order (``__rooms__``)."""

    def room(module: str, package: str) -> str | None:
        """The room of ``module`` in ``package``; "" for the package's own modules (its
        composition root and ``__init__``); None outside the package."""
        if not module.startswith(package + "."):
            return None if module != package else ""
        first = module[len(package) + 1 :].split(".")[0]
        return first if first in rooms[package] else ""

    problems = []
    for edge in edges:
        for package, order in rooms.items():
            here, there = room(edge.source, package), room(edge.target, package)
            if not here or there is None or here == there:
                continue
            if there == "" and edge.target != package:
                why = "the composition root, which no room imports"
            elif there and order.index(there) > order.index(here):
                why = "a room above it (" + " < ".join(order) + ")"
            else:
                continue
            problems.append(f"{edge.path}:{edge.line}: {edge.source} imports {edge.target}, {why}")
    return problems


def package_of(module: str) -> str:
    """The room a module belongs to: the root's direct subpackage, or itself when it lies
    directly in the root. A ``__main__`` module is a room of its own: an entry point
    (``python -m themis.runtime``) that composes the program, imported by nothing."""
    parts = module.split(".")
    if parts[-1] == "__main__":
        return module
    return ".".join(parts[:2])


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def findings(root: Path) -> tuple[list[str], dict[str, set[str]]]:
    """What breaks the rooms, one line each, and the package graph."""
    known = modules(root)
    edges = imports(known)
    problems: list[str] = []

    def where(edge: Import) -> str:
        return f"{edge.path}:{edge.line}: {edge.source} imports {edge.target}"

    module_graph: dict[str, set[str]] = {m: set() for m in known}
    package_graph: dict[str, set[str]] = {package_of(m): set() for m in known}
    for edge in edges:
        module_graph[edge.source].add(edge.target)
        here, there = package_of(edge.source), package_of(edge.target)
        if here != there:
            package_graph[here].add(there)
            private = [p for p in edge.target.split(".") if p.startswith("_")]
            if any(not p.startswith("__") for p in private):
                problems.append(f"{where(edge)}, a private module of another package")
            elif edge.name and edge.name.startswith("_") and not edge.name.startswith("__"):
                problems.append(f"{where(edge)}.{edge.name}, a private name of another package")
    problems += room_order_findings(edges, declared_rooms(known))
    for component in cycles(module_graph):
        members = set(component)
        inside = [e for e in edges if e.source in members and e.target in members]
        problems.append("module cycle: " + " -> ".join(component))
        problems += [f"  {where(e)}" for e in inside]
    for component in cycles(package_graph):
        members = set(component)
        across = [
            e
            for e in edges
            if package_of(e.source) in members
            and package_of(e.target) in members
            and package_of(e.source) != package_of(e.target)
        ]
        problems.append("package cycle: " + " -> ".join(component))
        problems += [f"  {where(e)}" for e in across]
    return problems, package_graph


def layers(graph: Mapping[str, set[str]]) -> list[str]:
    """The packages, each after everything it imports (the graph has no cycle)."""
    done: list[str] = []
    left = dict(graph)
    while left:
        ready = sorted(p for p, deps in left.items() if deps <= set(done))
        if not ready:
            return done + sorted(left)
        done += ready
        for p in ready:
            del left[p]
    return done


def graph_text(graph: Mapping[str, set[str]], root: str) -> str:
    """The package graph, one room a line, each after everything it imports (names
    without the root's: docs/architecture.md quotes it)."""

    def short(name: str) -> str:
        return f"{root} (__init__)" if name == root else name.removeprefix(root + ".")

    return "\n".join(
        textwrap.fill(
            ", ".join(short(d) for d in sorted(graph[p])) or "-",
            width=88,
            initial_indent=f"{short(p):<20}",
            subsequent_indent=" " * 20,
        )
        for p in layers(graph)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(__file__).resolve().parents[1] / "src" / "themis"
    parser.add_argument("--root", type=Path, default=default, help="the package to scan")
    parser.add_argument("--graph", action="store_true", help="print each package's imports")
    args = parser.parse_args(argv)
    if not (args.root / "__init__.py").is_file():
        print(f"import scan: {args.root} is not a package (no __init__.py)", file=sys.stderr)
        return 2
    problems, graph = findings(args.root)
    if args.graph:
        print(graph_text(graph, args.root.name))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    count = len(modules(args.root))
    print(
        f"import scan: {count} modules in {len(graph)} packages; no cycle, "
        "no private module or name imported across packages, rooms in order"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
