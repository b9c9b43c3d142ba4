"""The package's layers, checked on its import graph (read with `ast`: nothing is imported or run).

Rules ("arrows point down": a package answers one question, and imports only what lies below it):
    (a) no import cycle among specdec_lab's modules;
    (b) every import between rooms points down in `RANKS`, lazy imports included: each room (a top-level module
        or package) has a floor of its own, so two rooms never import each other both ways and there is no
        sideways; bottom up: machine < io < text < sampling < kv_cache (base utilities) < trees < accept <
        verify < models < cost < memory < medusa < eagle < proposers < generate < batch < the face (__init__)
        < train < serve < bench < viz < lab < sweep. Every room has a rank (a new one is placed, not added
        flat), and the core stays small;
    (c) decoding — `generate`, `verify`, `proposers.*` — never reaches training (`train*`) or the notebook
        layers (`viz*`, `lab*`), however indirectly; importing `specdec_lab.generate` loads no trainer,
        figure, widget, plotly or papermill (checked in a fresh interpreter);
    (d) `viz` (figure functions only) never imports ipywidgets, directly or through specdec_lab modules;
    (e) `viz` never imports `lab` (the dashboards sit above the figures).

The graph. An edge m -> t means: running m's import statements runs t. Every import counts, lazy ones
inside functions too; only `if TYPE_CHECKING:` blocks are skipped (they never run). Importing `a.b.c`
runs `a/__init__`, `a/b/__init__` and `a/b/c`, so the parent packages are edges too — except the
packages m itself lives in, which Python has already initialised (or is initialising) before m runs.
`from a.b import c` is an edge to the submodule `a.b.c` when there is one. Each failure names the chain
of modules that breaks the rule.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "specdec_lab"

DECODING = ("specdec_lab.generate", "specdec_lab.verify", "specdec_lab.proposers")
NOT_FROM_DECODING = ("specdec_lab.train", "specdec_lab.viz", "specdec_lab.lab")
VIZ, LAB = "specdec_lab.viz", "specdec_lab.lab"

# The package's floors, bottom up, one room a floor: an import may point into its own room or to a lower floor,
# never up and never sideways (two rooms on one floor could import each other both ways). A top-level module is
# its own room (the loop and its pieces, base utilities); a package is one room whatever its modules import inside
# it. `specdec_lab/__init__.py` (the public API, room "") stands on the loop. Within a group the order follows the
# arrows there are (accept -> trees, verify -> trees; memory -> cost -> models; batch -> generate, "" -> batch);
# where a group has none (the base utilities, the drafters, train/serve, lab/sweep) it is the order the code reads.
FLOORS = [
    "machine", "io", "text", "sampling", "kv_cache",  # base utilities
    "trees", "accept", "verify",  # the Tree; which path survives; one forward over a tree
    "models", "cost", "memory",  # the target as loaded; the price of a step; what a method carries
    "medusa", "eagle",  # the drafters
    "proposers",
    "generate", "batch", "",  # the loop (one sequence; B rows around one forward), the face
    "train", "serve",  # fitted from data; the drafters exported for and served by an engine
    "bench", "viz", "lab", "sweep",
]  # fmt: skip
RANKS = {room: rank for rank, room in enumerate(FLOORS)}
CORE_FILES = 10  # top-level modules, __init__ included: the loop, its pieces, base utilities


# ---- the graph ------------------------------------------------------------------------------------------
@dataclass
class ImportGraph:
    modules: dict[str, Path]  # dotted name -> file (a package is its __init__.py)
    edges: dict[str, set[str]] = field(default_factory=dict)  # module -> the package's modules it runs
    external: dict[str, set[str]] = field(default_factory=dict)  # module -> top-level names of other packages

    def chain(self, start: str, found: Callable[[str], bool]) -> list[str] | None:
        """The shortest chain start -> ... -> m of edges to a module m with found(m) (start included)."""
        before: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            m = queue.popleft()
            if found(m):
                out = [m]
                while before[out[-1]] is not None:
                    out.append(before[out[-1]])
                return out[::-1]
            for t in sorted(self.edges[m]):
                if t not in before:
                    before[t] = m
                    queue.append(t)
        return None

    def cycles(self) -> list[list[str]]:
        """One (shortest) cycle a -> ... -> a per strongly connected component of more than one module, through
        the component's first module; `components()` lists every module of each."""
        out = []
        for component in self.components():
            first = min(component)
            inside = {m: {t for t in self.edges[m] if t in component} for m in component}
            sub = ImportGraph(self.modules, inside)
            back = [path for t in sorted(inside[first]) if (path := sub.chain(t, first.__eq__))]
            out.append([first, *min(back, key=len)])
        return sorted(out)

    def components(self) -> list[set[str]]:
        """The strongly connected components of more than one module: each is one knot of cycles."""
        return [c for c in _components(self.edges) if len(c) > 1]


def in_package(name: str, prefixes) -> bool:
    """`name` is one of `prefixes` or a module inside one ("specdec_lab.viz" covers "specdec_lab.viz.cost")."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _module_names(root: Path) -> dict[str, Path]:
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(nodes):
    """Every Import / ImportFrom among `nodes`, at any depth, except inside `if TYPE_CHECKING:` (its else runs)."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imports(node.orelse)
        else:
            yield from _imports(ast.iter_child_nodes(node))


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def build_graph(root: Path = PACKAGE_DIR) -> ImportGraph:
    """The import graph of the package in directory `root` (see the module docstring for what an edge is)."""
    modules = _module_names(root)
    package = root.name
    graph = ImportGraph(modules, {m: set() for m in modules}, {m: set() for m in modules})
    for m, path in modules.items():
        here = m.split(".") if path.name == "__init__.py" else m.split(".")[:-1]  # the package m is in
        targets: list[str] = []
        for node in _imports([ast.parse(path.read_text(encoding="utf-8"), filename=str(path))]):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    targets += _prefixes(alias.name)
                continue
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets += _prefixes(base) + [f"{base}.{alias.name}" for alias in node.names]
        for t in targets:
            top = t.split(".")[0]
            if top != package:
                graph.external[m].add(top)
            elif t in modules and t != m and not m.startswith(t + "."):  # not m's own (enclosing) packages
                graph.edges[m].add(t)
    return graph


def _components(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == v:
                        break
                out.append(component)
    return out


def _arrows(chain: list[str]) -> str:
    return " -> ".join(chain)


def room(module: str) -> str:
    """The room a module stands in: its top-level module or package under the root ("" = the root's face)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports_not_down(graph: ImportGraph, ranks: dict[str, int]) -> list[str]:
    """Every import m -> t into another room that does not rank below m's: up, or sideways to a room of the same
    rank (each as 'm (room r) -> t (room r')'). Inside a room any import goes."""
    out = []
    for m in sorted(graph.edges):
        for t in sorted(graph.edges[m]):
            if room(t) != room(m) and ranks[room(t)] >= ranks[room(m)]:
                out.append(f"{m} ({room(m)}: {ranks[room(m)]}) -> {t} ({room(t)}: {ranks[room(t)]})")
    return out


# ---- the rules ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return build_graph()


def test_no_import_cycles(graph):
    lines = []
    for cycle in graph.cycles():
        knot = next(c for c in graph.components() if cycle[0] in c)
        others = sorted(knot - set(cycle))
        lines.append(_arrows(cycle) + (f" (in the same knot: {', '.join(others)})" if others else ""))
    assert not lines, "import cycles:\n" + "\n".join(lines)


def test_every_room_has_a_rank_of_its_own_and_the_core_stays_small(graph):
    rooms = {room(m) for m in graph.modules}
    assert not rooms - set(RANKS), f"place these in a package of their question, or rank them: {rooms - set(RANKS)}"
    assert len(FLOORS) == len(set(FLOORS)) == len(set(RANKS.values())), "a room stands on one floor, alone"
    core = sorted(p.name for p in PACKAGE_DIR.glob("*.py"))
    assert len(core) <= CORE_FILES, f"{len(core)} modules flat in specdec_lab/ (at most {CORE_FILES}): {core}"


def test_every_import_runs_down(graph):
    up = imports_not_down(graph, RANKS)
    assert not up, "imports that run up or sideways (move the code down, or the import up):\n" + "\n".join(up)


def test_importing_the_loop_loads_no_trainer_figure_widget_or_notebook_tool():
    """In a fresh interpreter (what is imported is what runs): `import specdec_lab.generate` pulls in neither
    the training code nor the notebook layers nor their libraries."""
    code = (
        "import sys, specdec_lab.generate\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('plotly', 'ipywidgets', 'papermill', 'nbformat', 'nbclient', 'kaleido') "
        "or m.startswith(('specdec_lab.train', 'specdec_lab.viz', 'specdec_lab.lab', 'specdec_lab.bench', "
        "'specdec_lab.sweep')))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE_DIR.parent
    )
    assert out.stdout.strip() == "", f"importing specdec_lab.generate loaded:\n{out.stdout}"


def test_decoding_never_reaches_training_or_the_notebook_layers(graph):
    starts = [m for m in graph.modules if in_package(m, DECODING)]
    assert "specdec_lab.proposers.lookahead" in starts  # the rule covers every proposer
    bad = {}
    for m in starts:
        chain = graph.chain(m, lambda t: in_package(t, NOT_FROM_DECODING))
        if chain is not None:
            bad.setdefault(chain[-1], chain)  # the shortest chain per forbidden module is enough to fix it
    assert not bad, "decoding reaches training / viz / lab:\n" + "\n".join(_arrows(c) for c in bad.values())


def test_viz_never_imports_ipywidgets(graph):
    viz = [m for m in graph.modules if in_package(m, [VIZ])]
    assert len(viz) > 5
    bad = [c for m in viz if (c := graph.chain(m, lambda t: "ipywidgets" in graph.external[t]))]
    assert not bad, "viz imports ipywidgets:\n" + "\n".join(_arrows([*c, "ipywidgets"]) for c in bad)


def test_viz_never_imports_lab(graph):
    viz = [m for m in graph.modules if in_package(m, [VIZ])]
    bad = [c for m in viz if (c := graph.chain(m, lambda t: in_package(t, [LAB])))]
    assert not bad, "viz imports lab:\n" + "\n".join(_arrows(c) for c in bad)


def test_the_experiment_needs_no_widgets(graph):
    """Sweeps import lab.experiment (through notebook 08) where ipywidgets may be missing."""
    chain = graph.chain("specdec_lab.lab.experiment", lambda t: "ipywidgets" in graph.external[t])
    assert chain is None, _arrows([*chain, "ipywidgets"])
    assert graph.external["specdec_lab.lab"] == set() and graph.edges["specdec_lab.lab"] == set()  # docstring only


# ---- the graph builder finds what it should (a planted package) ------------------------------------------
def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_graph_builder_on_a_planted_package(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import f\n",
            "pkg/a.py": "def f():\n    from .b import y  # lazy: still an edge\n    return y\n",
            "pkg/b.py": "import pkg.sub.c\ny = 1\n",  # runs pkg/sub/__init__ too
            "pkg/sub/__init__.py": "from ..a import f\n",  # closes a -> b -> sub -> a
            "pkg/sub/c.py": "import ipywidgets.widgets\nfrom . import d\nfrom pkg.sub import e\n",
            "pkg/sub/d.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\nelse:\n    import json\n"
            ),
            "pkg/sub/e.py": "import pkg\nfrom pkg import sub\n",  # e's own packages: initialised already
        },
    )
    g = build_graph(pkg)
    assert set(g.modules) == {"pkg", "pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c", "pkg.sub.d", "pkg.sub.e"}
    assert g.edges["pkg"] == {"pkg.a"}
    assert g.edges["pkg.a"] == {"pkg.b"}  # lazy import inside a function
    assert g.edges["pkg.b"] == {"pkg.sub", "pkg.sub.c"}  # the parent package's __init__ runs
    assert g.edges["pkg.sub"] == {"pkg.a"}
    assert g.edges["pkg.sub.c"] == {"pkg.sub.d", "pkg.sub.e"}  # `from . import d`: a submodule
    assert g.edges["pkg.sub.d"] == set() and g.external["pkg.sub.d"] == {"typing", "json"}  # TYPE_CHECKING skipped
    assert g.edges["pkg.sub.e"] == set() and g.external["pkg.sub.e"] == set()
    assert g.external["pkg.sub.c"] == {"ipywidgets"}
    assert g.cycles() == [["pkg.a", "pkg.b", "pkg.sub", "pkg.a"]]
    assert g.chain("pkg", lambda t: "ipywidgets" in g.external[t]) == ["pkg", "pkg.a", "pkg.b", "pkg.sub.c"]
    assert g.chain("pkg.sub.d", lambda t: t == "pkg.a") is None


def test_a_planted_upward_import_fails_the_rank_rule(tmp_path):
    """The rank rule on a planted package: a lazy import from a lower room to a higher one is found, an import
    down, or between modules of one room, is not."""
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/base.py": "def f():\n    from .top import g  # lazy, and upward\n    return g\n",
            "pkg/mid/__init__.py": "from ..base import f\n",
            "pkg/mid/a.py": "from . import b\n",  # sideways, inside its own room
            "pkg/mid/b.py": "import pkg.base\n",
            "pkg/top.py": "from .mid import a\ng = 1\n",
        },
    )
    g = build_graph(pkg)
    ranks = {"base": 0, "mid": 1, "top": 2, "": 3}
    assert imports_not_down(g, ranks) == ["pkg.base (base: 0) -> pkg.top (top: 2)"]
    (pkg / "base.py").write_text("def f():\n    return 1\n")
    assert imports_not_down(build_graph(pkg), ranks) == []


def test_two_rooms_importing_each_other_both_ways_fail_the_rank_rule(tmp_path):
    """Two rooms that once shared a rank (as generate and batch did) and import each other both ways: with a floor
    each, the arrow up is found; given one rank, both arrows are (a shared floor is no way out); with only the
    arrow down left, the rule passes."""
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/base.py": "x = 1\n",
            "pkg/loop.py": "from .base import x\n\ndef f():\n    from .rows import g  # lazy, and up\n    return g\n",
            "pkg/rows.py": "from .loop import f\n\ndef g():\n    return f\n",
        },
    )
    g = build_graph(pkg)
    assert imports_not_down(g, {"base": 0, "loop": 1, "rows": 2, "": 3}) == ["pkg.loop (loop: 1) -> pkg.rows (rows: 2)"]
    assert imports_not_down(g, {"base": 0, "loop": 1, "rows": 1, "": 3}) == [
        "pkg.loop (loop: 1) -> pkg.rows (rows: 1)",
        "pkg.rows (rows: 1) -> pkg.loop (loop: 1)",
    ]
    (pkg / "loop.py").write_text("from .base import x\n")
    assert imports_not_down(build_graph(pkg), {"base": 0, "loop": 1, "rows": 2, "": 3}) == []
