"""What an acceptance rule returns: the accepted path and the bonus token (`accept/` registers the rules).

Its own module so that rule modules (`accept/tree_rules.py`) and the registry (`accept/`) both import it
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Acceptance"]


@dataclass
class Acceptance:
    path: list[int]  # accepted node indices, root (0) first
    bonus: int  # token appended after the path's last node

    @property
    def accepted_draft(self) -> int:
        """Draft tokens accepted (the root is not a draft token)."""
        return len(self.path) - 1
