"""Proposers: each speculative method is the shared loop plus one of these; registry.py names them."""

from .autoregressive import AutoregressiveProposer
from .base import DecodeState, Proposer
from .draft import DraftConfig, DraftProposer, LayerSkipConfig, LayerSkipProposer
from .eagle import EagleDecodeConfig, EagleProposer
from .hybrid import HybridConfig, HybridProposer
from .jacobi import JacobiConfig, JacobiProposer
from .lookahead import LookaheadConfig, LookaheadProposer
from .medusa import MedusaDecodeConfig, MedusaProposer
from .prompt_lookup import PromptLookupConfig, PromptLookupProposer
from .recycle import RecycleConfig, RecycleProposer
from .registry import METHODS, Method, get_method, make_proposer, register_method

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
    "EagleDecodeConfig",
    "EagleProposer",
    "HybridConfig",
    "HybridProposer",
    "MedusaDecodeConfig",
    "MedusaProposer",
    "JacobiConfig",
    "JacobiProposer",
    "LookaheadConfig",
    "LookaheadProposer",
    "RecycleConfig",
    "RecycleProposer",
    "Method",
    "METHODS",
    "register_method",
    "get_method",
    "make_proposer",
]
