"""Rank-path trees: the names of a draft tree's nodes, their checks, and the files trees are shipped in.

A drafter that proposes, at every depth d, its top-S candidates (Medusa's heads, EAGLE's top-k expansion,
a chain's top-1) names each tree node by its *rank path* (r_1, ..., r_d): its depth-j token is depth j's
rank-r_j candidate, and its parent is (r_1, ..., r_{d-1}). The root (the empty path) is implicit. A set of
paths is a tree iff it is prefix-closed; sorted by (len, path) every parent precedes its children, which is
the node order a `Tree` needs (`parents[i] < i`).

FasterDecoding ships Medusa trees as lists of such paths (`medusa_choices`, e.g. `[[0], [0, 0], [1], ...]`);
`read_choices` / `write_choices` read and write them (JSON, or the `.py` files, parsed, never executed), and
`parse_tree` reads the short specs a config may give instead ("chain:3", "cartesian:4,2", a file).
"""

from __future__ import annotations

import ast
import itertools
import json
import operator
import os
from collections.abc import Sequence
from pathlib import Path

from ..io import atomic_path, write_json

__all__ = [
    "RankPath",
    "as_rank_paths",
    "cartesian_paths",
    "cartesian_size",
    "check_paths",
    "normalize_paths",
    "parse_tree",
    "read_choices",
    "write_choices",
]

RankPath = tuple[int, ...]  # a rank path (r_1, ..., r_d); () is the root


# ---- rank paths -------------------------------------------------------------------------------------
def _check_tops(tops: Sequence[int]) -> list[int]:
    tops = [operator.index(s) for s in tops]
    if any(s < 1 for s in tops):
        raise ValueError(f"tops must be positive candidate counts per depth, got {tops}")
    return tops


def cartesian_paths(tops: Sequence[int]) -> list[RankPath]:
    """Every rank path of the full tree whose depth-d nodes are the top-`tops[d-1]` of head d.

    Sorted by (len, path): parents come before children. len = Σ_d Π_{j<=d} tops[j] (`cartesian_size`).
    """
    tops = _check_tops(tops)
    return [p for d in range(1, len(tops) + 1) for p in itertools.product(*(range(s) for s in tops[:d]))]


def cartesian_size(tops: Sequence[int]) -> dict:
    """{"nodes": nodes excluding the root, "paths": root-to-leaf paths (= leaves)} of the Cartesian tree."""
    tops = _check_tops(tops)
    widths = list(itertools.accumulate(tops, operator.mul))  # nodes at depth d = Π_{j<=d} tops[j]
    return {"nodes": sum(widths), "paths": widths[-1] if widths else 0}


def check_paths(paths: Sequence[Sequence[int]]) -> None:
    """Raise ValueError unless `paths` are non-empty rank paths of non-negative ints, distinct, prefix-closed."""
    seen: set[RankPath] = set()
    for path in paths:
        if isinstance(path, (str, bytes)) or not isinstance(path, Sequence):
            raise ValueError(f"a rank path must be a list or tuple of ints, got {path!r}")
        if len(path) == 0:
            raise ValueError("empty rank path: the root is implicit, list only the nodes below it")
        for r in path:
            if isinstance(r, bool) or not isinstance(r, int) or r < 0:
                raise ValueError(f"rank path {list(path)} has {r!r}: ranks must be non-negative ints")
        key = tuple(path)
        if key in seen:
            raise ValueError(f"rank path {list(path)} appears twice")
        seen.add(key)
    for key in seen:
        if len(key) > 1 and key[:-1] not in seen:
            raise ValueError(f"rank path {list(key)} has no parent {list(key[:-1])}: paths must be prefix-closed")


def normalize_paths(paths: Sequence[Sequence[int]]) -> list[RankPath]:
    """Validated (`check_paths`) tuples sorted by (len, path): parents before children."""
    paths = as_rank_paths(paths)
    return sorted(paths, key=lambda p: (len(p), p))


def as_rank_paths(paths) -> list[RankPath]:
    """Validated paths as tuples of plain ints, in the order given."""
    paths = [tuple(_rank(r, p) for r in p) for p in _listed(paths)]
    check_paths(paths)
    return paths


def _rank(r, path) -> int:
    """r as a plain int (numpy / 0-d torch integers too); bools and non-integers are a ValueError."""
    if isinstance(r, bool):
        raise ValueError(f"rank path {list(path)} has {r!r}: ranks must be non-negative ints")
    try:
        return operator.index(r)
    except TypeError:
        raise ValueError(f"rank path {list(path)} has {r!r}: ranks must be non-negative ints") from None


def _listed(paths) -> list:
    if isinstance(paths, (str, bytes)) or not isinstance(paths, Sequence):
        raise ValueError(f"expected a list of rank paths, got {type(paths).__name__}")
    out = []
    for p in paths:
        if isinstance(p, (str, bytes)) or not isinstance(p, Sequence):
            raise ValueError(f"a rank path must be a list or tuple of ints, got {p!r}")
        out.append(p)
    return out


def read_choices(path: str | os.PathLike, name: str | None = None) -> list[RankPath]:
    """Rank paths from a JSON file or a FasterDecoding-style `medusa_choices.py`, normalized.

    JSON: a list of lists, or {"name": ..., "choices": [...]}. Python (`.py`): top-level assignments such as
    `mc_sim_7b_63 = [[0], [0, 0], ...]`, parsed with `ast` and read with `ast.literal_eval` (the file is never
    executed). With several list assignments, `name` picks one; without it, there must be exactly one.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"choices file not found: {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        found = _python_choices(text, path)
        if name is not None:
            if name not in found:
                raise ValueError(f"{path}: no assignment named {name!r}; it defines {sorted(found)}")
            choices = found[name]
        elif len(found) == 1:
            choices = next(iter(found.values()))
        else:
            raise ValueError(f"{path}: {len(found)} choice lists {sorted(found)}; pass name= to pick one")
    else:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
        if isinstance(obj, dict):
            if "choices" not in obj:
                raise ValueError(f"{path}: a JSON object needs a 'choices' key, got keys {sorted(obj)}")
            if name is not None and obj.get("name") not in (None, name):
                raise ValueError(f"{path}: holds choices named {obj.get('name')!r}, not {name!r}")
            choices = obj["choices"]
        else:
            choices = obj
    try:
        return normalize_paths(choices)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def _python_choices(text: str, path: Path) -> dict[str, list]:
    """name -> literal list value of every top-level `name = [...]` (non-literal values are skipped)."""
    try:
        module = ast.parse(text, filename=str(path))
    except SyntaxError as err:
        raise ValueError(f"{path}: not valid Python ({err.msg} at line {err.lineno})") from None
    found: dict[str, list] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        try:
            literal = ast.literal_eval(value)  # literals only: no names, calls or attribute access
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(literal, (list, tuple)) and all(isinstance(p, (list, tuple)) for p in literal):
            found[target.id] = list(literal)  # a list of rank paths (skips e.g. __all__ = ["..."])
    if not found:
        raise ValueError(f"{path}: no top-level `name = [[...], ...]` assignment found")
    return found


def write_choices(path: str | os.PathLike, choices: Sequence[Sequence[int]], name: str | None = None) -> Path:
    """Write normalized rank paths atomically: JSON ({"name", "choices"} when named, else a list of lists),
    or, for a `.py` path, FasterDecoding's `name = [[0], [0, 0], ...]` (name defaults to "medusa_choices")."""
    lists = [list(p) for p in normalize_paths(choices)]
    path = Path(path)
    if path.suffix == ".py":
        name = name or "medusa_choices"
        if not name.isidentifier():
            raise ValueError(f"name {name!r} is not a Python identifier")
        with atomic_path(path) as tmp:
            tmp.write_text(f"{name} = {lists!r}\n", encoding="utf-8")
        return path
    return write_json(path, lists if name is None else {"name": name, "choices": lists}, indent=None)


def parse_tree(spec: str | Sequence) -> list[RankPath]:
    """A tree spec -> rank paths, parents first. "chain:N": depths 1..N's top-1; "cartesian:8,4": the full tree of
    depth 1's top-8 and depth 2's top-4; a medusa_choices file (.json or .py); or a list of rank paths."""
    if not isinstance(spec, str):
        return normalize_paths(spec)
    kind, _, arg = spec.partition(":")
    try:
        if kind == "chain":
            return [(0,) * d for d in range(1, int(arg) + 1)]
        if kind == "cartesian":
            return cartesian_paths([int(s) for s in arg.split(",")])
    except ValueError:
        raise ValueError(f"tree {spec!r}: expected 'chain:N' or 'cartesian:s1,s2,...' with integers") from None
    if os.path.exists(spec):
        return read_choices(spec)
    raise ValueError(f"tree {spec!r} is not 'chain:N', 'cartesian:s1,s2,...', a list of rank paths or an existing "
                     "choices file")  # fmt: skip
