"""A sweep spec (YAML) and the grid points it expands to, each with a stable id.

    name: draft_length_temperature
    notebook: notebooks/08_speedup_lab.ipynb      # executed once per point with papermill
    metric: speedup                               # the headline result key (figures, `best`)
    parameters: {prompt_id: [1, 9], max_new_tokens: 64}        # fixed for every point
    grid: {draft_length: [1, 2, 4, cost], temperature: [0.0, 0.7]}   # cartesian product, in this order
    templates: {method: "draft:draft_length={draft_length}"}   # notebook parameters built from the grid
    quick: {grid: {draft_length: [1, 4]}, parameters: {max_new_tokens: 16}}   # --quick: merged over the above

A point's notebook parameters are `parameters`, then its grid values, then the templates formatted with
those values (str.format). A grid axis that a template uses is *consumed*: it names the point and labels
the figures, but is not passed to the notebook (the notebook takes `method`, not `draft_length`). `quick`
replaces the axes and parameters it names and keeps the others, so its points have the same axes.

Ids. A point's id is `<slug>-<hash>`: the slug is its grid values for reading ("draft_length-1.temperature-0.7"),
the hash the first 8 hex digits of SHA-1 over its notebook parameters as canonical JSON. The same parameters
give the same id in every run and on every machine, so a rerun finds its finished points (resume), and a
point whose parameters change (another max_new_tokens) is a new point, never a stale result.

Every error names the spec file and the bad key or value (`SpecError`), before any notebook runs.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import re
import string
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..io import REPO_DIR

__all__ = ["SpecError", "SweepSpec", "Point", "load_spec", "expand", "check_methods", "REPO_ROOT"]

REPO_ROOT = REPO_DIR  # where shipped specs name their notebooks from
RESULT_PATH = "result_path"  # the notebook parameter the runner sets to the point's result file
KEYS = {
    "name": "the sweep's name (output folder and figure names)",
    "description": "free text",
    "notebook": "path of the notebook to execute, relative to the current folder or the repository",
    "metric": "result key plotted and maximised for `best` (default: speedup)",
    "parameters": "notebook parameters fixed for every point",
    "grid": "axis -> list of values; points are the cartesian product",
    "templates": "notebook parameter -> format string over grid axes, e.g. 'lookahead:W={W}:N={N}'",
    "quick": "{grid: ..., parameters: ...} merged over the above by --quick",
}
QUICK_KEYS = ("grid", "parameters")
SCALARS = (str, int, float, bool, type(None))


class SpecError(ValueError):
    """A sweep spec that cannot be run as written; the message names the file and the bad key or value."""


@dataclass(frozen=True)
class SweepSpec:
    name: str
    notebook: Path  # resolved, exists
    grid: dict[str, list]  # axis -> values (order kept: it is the figures' order)
    parameters: dict = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)
    metric: str = "speedup"
    description: str = ""
    quick: dict = field(default_factory=dict)  # {"grid": {...}, "parameters": {...}}
    source: Path | None = None  # the YAML file, for messages

    def quick_spec(self) -> SweepSpec:
        """The spec --quick runs: quick's axes and parameters replace the same-named ones."""
        grid = {**self.grid, **self.quick.get("grid", {})}
        return replace(self, grid=grid, parameters={**self.parameters, **self.quick.get("parameters", {})}, quick={})

    @property
    def axes(self) -> list[str]:
        return list(self.grid)

    @property
    def varying(self) -> list[str]:
        """Axes with more than one value: the ones a figure has to show."""
        return [a for a, values in self.grid.items() if len(values) > 1]


@dataclass(frozen=True)
class Point:
    id: str  # "<slug>-<hash8>": the folder name under points/
    values: dict  # grid axis -> value
    parameters: dict  # what the notebook gets (without result_path)


# ---- reading and checking ---------------------------------------------------------------------------
def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _check_values(where: str, values) -> None:
    """Parameter values go into a notebook's parameters cell as Python literals: scalars or lists of them."""
    items = values if isinstance(values, list) else [values]
    for v in items:
        if isinstance(v, list):
            _check_values(where, v)
        elif not isinstance(v, SCALARS):
            raise SpecError(f"{where}: {v!r} is a {type(v).__name__}; use numbers, strings, booleans or lists")


def _check_mapping(where: str, obj, *, what: str) -> dict:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise SpecError(f"{where}: expected a mapping of {what}, got {type(obj).__name__} {obj!r}")
    bad = [k for k in obj if not (isinstance(k, str) and k.isidentifier())]
    if bad:
        raise SpecError(f"{where}: {bad[0]!r} is not a valid parameter name (a Python identifier)")
    return dict(obj)


def _check_grid(where: str, grid, *, allow_empty: bool = False) -> dict[str, list]:
    grid = _check_mapping(where, grid, what="axis -> list of values")
    if not grid and not allow_empty:
        raise SpecError(f"{where}: the grid is empty; give at least one axis with a list of values")
    for axis, values in grid.items():
        if not isinstance(values, list):
            values = grid[axis] = [values]  # a lone value is a one-point axis
        if not values:
            raise SpecError(f"{where}.{axis}: empty list of values (an axis needs at least one)")
        _check_values(f"{where}.{axis}", values)
        seen = [json.dumps(v, sort_keys=True) for v in values]
        dupes = sorted({s for s in seen if seen.count(s) > 1})
        if dupes:
            raise SpecError(f"{where}.{axis}: value {dupes[0]} listed twice")
    return grid


def _notebook_path(text, where: str) -> Path:
    if not isinstance(text, str) or not text:
        raise SpecError(f"{where}: 'notebook' must be a path (e.g. notebooks/08_speedup_lab.ipynb), got {text!r}")
    path = Path(text)
    tried = [path] if path.is_absolute() else [Path.cwd() / path, REPO_ROOT / path]
    for p in tried:
        if p.is_file():
            return p.resolve()
    raise SpecError(f"{where}: notebook {text!r} does not exist (looked at {', '.join(str(p) for p in tried)})")


def notebook_parameters(notebook: Path) -> set[str] | None:
    """Names assigned in the notebook's `parameters`-tagged cell; None when it has none we can parse.

    Read with `ast`, not papermill.inspect_notebook: papermill's inference skips annotated parameters it
    cannot type (`prompt_id: int | list = 46`, `result_path: str | None = None`).
    """
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return None
    for cell in cells:
        if cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            try:
                tree = ast.parse(source)
            except SyntaxError:
                return None
            names = set()
            for node in tree.body:
                targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
                names.update(t.id for t in targets if isinstance(t, ast.Name))
            return names
    return None


def load_spec(path: str | Path) -> SweepSpec:
    """Read and check a sweep spec; every problem is a SpecError naming the file and the key or value."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise SpecError(f"sweep spec {path} not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise SpecError(f"{path}: not valid YAML: {err}") from None
    where = str(path)
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a mapping with keys {', '.join(KEYS)}; got {type(raw).__name__}")
    unknown = [k for k in raw if k not in KEYS]
    if unknown:
        known = "; ".join(f"{k}: {v}" for k, v in KEYS.items())
        raise SpecError(f"{where}: unknown key {unknown[0]!r}. Known keys — {known}")
    for key in ("name", "notebook", "grid"):
        if key not in raw:
            raise SpecError(f"{where}: missing key {key!r} ({KEYS[key]})")
    name = raw["name"]
    if not (isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", name)):
        raise SpecError(f"{where}: name {name!r} must be letters, digits, '_', '-' or '.' (it names a folder)")
    metric = raw.get("metric", "speedup")
    if not isinstance(metric, str) or not metric:
        raise SpecError(f"{where}: metric must be a result key such as 'speedup', got {metric!r}")

    parameters = _check_mapping(f"{where}: parameters", raw.get("parameters"), what="name -> value")
    for key, value in parameters.items():
        _check_values(f"{where}: parameters.{key}", value)
    grid = _check_grid(f"{where}: grid", raw.get("grid"))
    templates = _check_mapping(f"{where}: templates", raw.get("templates"), what="parameter -> format string")
    quick = _check_mapping(f"{where}: quick", raw.get("quick"), what="grid / parameters")
    bad = [k for k in quick if k not in QUICK_KEYS]
    if bad:
        raise SpecError(f"{where}: quick: unknown key {bad[0]!r}; quick takes {' and '.join(QUICK_KEYS)}")
    quick_grid = _check_grid(f"{where}: quick.grid", quick.get("grid"), allow_empty=True)
    quick_params = _check_mapping(f"{where}: quick.parameters", quick.get("parameters"), what="name -> value")
    for key, value in quick_params.items():
        _check_values(f"{where}: quick.parameters.{key}", value)
    extra = [a for a in quick_grid if a not in grid]
    if extra:
        raise SpecError(f"{where}: quick.grid.{extra[0]}: not an axis of grid ({', '.join(grid)})")

    for key in sorted({*parameters, *quick_params} & set(grid)):
        raise SpecError(f"{where}: {key!r} is both a fixed parameter and a grid axis; keep one")
    for key, template in templates.items():
        if not isinstance(template, str):
            raise SpecError(f"{where}: templates.{key}: expected a format string, got {template!r}")
        try:
            missing = sorted(_fields(template) - set(grid))
        except ValueError as err:
            raise SpecError(f"{where}: templates.{key}: bad format string {template!r} ({err})") from None
        if missing:
            raise SpecError(f"{where}: templates.{key} uses {{{missing[0]}}}, which is not a grid axis")
        if key in grid or key in parameters or key in quick_params:
            raise SpecError(f"{where}: templates.{key}: {key!r} is also a grid axis or fixed parameter; keep one")
    if RESULT_PATH in {*parameters, *quick_params, *grid, *templates}:
        raise SpecError(f"{where}: {RESULT_PATH!r} is set by the runner for each point; remove it from the spec")

    notebook = _notebook_path(raw["notebook"], f"{where}: notebook")
    spec = SweepSpec(
        name=name,
        notebook=notebook,
        grid=grid,
        parameters=parameters,
        templates=templates,
        metric=metric,
        description=str(raw.get("description") or ""),
        quick={"grid": quick_grid, "parameters": quick_params},
        source=path,
    )
    _check_against_notebook(spec, where)
    return spec


def _check_against_notebook(spec: SweepSpec, where: str) -> None:
    """Every name the notebook will get must be one of its parameters (papermill would only log a warning)."""
    known = notebook_parameters(spec.notebook)
    if known is None:
        return
    if RESULT_PATH not in known:
        raise SpecError(f"{where}: notebook {spec.notebook.name} has no {RESULT_PATH!r} parameter to write its result")
    consumed = {f for t in spec.templates.values() for f in _fields(t)}
    axes = [a for a in spec.grid if a not in consumed]
    passed = [*spec.parameters, *spec.quick["parameters"], *axes, *spec.templates]
    for name in passed:
        if name not in known:
            raise SpecError(
                f"{where}: {name!r} is not a parameter of {spec.notebook.name} "
                f"(it takes: {', '.join(sorted(known))}); a grid axis used only in templates is not passed"
            )


# ---- points -----------------------------------------------------------------------------------------
def _slug_part(value) -> str:
    text = "+".join(map(str, value)) if isinstance(value, list) else str(value)
    return re.sub(r"[^A-Za-z0-9.+=_-]+", "-", text).strip("-") or "x"


def point_id(values: dict, parameters: dict) -> str:
    digest = hashlib.sha1(json.dumps(parameters, sort_keys=True).encode()).hexdigest()[:8]
    slug = ".".join(f"{axis}-{_slug_part(v)}" for axis, v in values.items()).replace("=", "-")
    return f"{slug[:60].rstrip('.-')}-{digest}"


def expand(spec: SweepSpec) -> list[Point]:
    """The grid's cartesian product in axis order (the last axis varies fastest), as Points with stable ids."""
    consumed = {f for t in spec.templates.values() for f in _fields(t)}
    points = []
    for combo in itertools.product(*spec.grid.values()):
        values = dict(zip(spec.grid, combo, strict=True))
        params = dict(spec.parameters)
        params.update({a: v for a, v in values.items() if a not in consumed})
        params.update({k: t.format(**values) for k, t in spec.templates.items()})
        points.append(Point(id=point_id(values, params), values=values, parameters=params))
    return points


def check_methods(spec: SweepSpec, points: list[Point]) -> None:
    """Method specs in a `method` parameter are parsed and checked against the registry before any notebook
    runs (`proposers.registry.check_method_spec`).

    (Imports the registry, hence torch: a few seconds, against a typo found after an hour of sweeping.)
    """
    methods = sorted({p.parameters["method"] for p in points if isinstance(p.parameters.get("method"), str)})
    if not methods:
        return
    from ..proposers.registry import MethodSpecError, check_method_spec

    for m in methods:
        try:
            check_method_spec(m)
        except MethodSpecError as err:
            raise SpecError(f"{spec.source}: method {m!r}: {err}") from None
