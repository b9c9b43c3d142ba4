"""Training entry points: `python -m specdec_lab.train <subcommand> [options]`.

Each subcommand is a module `specdec_lab.train.<name>` with a `main(argv) -> int`; the dispatcher finds
them by listing this package, so adding one is adding a file (e.g. `draft.py`). A module named `<name>_cli`
is the subcommand `<name>`: `medusa_cli.py` is `medusa`, the command line around the Medusa training loop
of `specdec_lab/medusa/train.py` (two files called "medusa train" would read as one thing).

    python -m specdec_lab.train medusa --steps 600 --out data/medusa/smollm2-135m
    python -m specdec_lab.train medusa --help
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Sequence

__all__ = ["subcommands", "main"]


def _modules() -> dict[str, str]:
    """{subcommand: module name} of this package's public modules."""
    names = (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return {name.removesuffix("_cli"): name for name in names}


def subcommands() -> list[str]:
    """Names of the available subcommands (the modules of this package, private ones excluded)."""
    return sorted(_modules())


def _usage() -> str:
    names = "\n".join(f"    {n}" for n in subcommands())
    return f"usage: python -m specdec_lab.train <subcommand> [options]\n\nsubcommands:\n{names}\n"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage(), end="")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    modules = _modules()
    if name not in modules:
        print(f"unknown subcommand {name!r}\n\n{_usage()}", end="", file=sys.stderr)
        return 2
    module = importlib.import_module(f"{__name__}.{modules[name]}")
    return int(module.main(rest) or 0)
