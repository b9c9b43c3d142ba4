"""Proposers: each speculative method is the shared loop plus one of these."""

from .autoregressive import AutoregressiveProposer
from .base import DecodeState, Proposer
from .draft import DraftConfig, DraftProposer, LayerSkipConfig, LayerSkipProposer
from .prompt_lookup import PromptLookupConfig, PromptLookupProposer

__all__ = [
    "DecodeState",
    "Proposer",
    "AutoregressiveProposer",
    "PromptLookupConfig",
    "PromptLookupProposer",
    "DraftConfig",
    "DraftProposer",
    "LayerSkipConfig",
    "LayerSkipProposer",
]
