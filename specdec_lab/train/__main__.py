"""`python -m specdec_lab.train <subcommand> ...` (see specdec_lab/train/__init__.py)."""

from . import main

raise SystemExit(main())
