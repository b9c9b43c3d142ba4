"""specdec_lab: speculative decoding, implemented once, measured honestly, shown so people understand it.

Every method is one loop (`generate`) with a pluggable proposer; see `specdec_lab.generate`. `generate_batch` runs
that loop's steps for B sequences around one target forward (`specdec_lab.batch`).
"""

from .accept.chain import accept_greedy, accept_speculative
from .accept.result import Acceptance
from .batch import BatchResult, generate_batch
from .cost.curve import CostCurve, measure_cost_curve
from .cost.step import StepCost
from .generate import METHODS, GenerationResult, StepTrace, generate, make_proposer, register_method
from .kv_cache import KVCache
from .memory import Memory
from .models.draft_model import Draft, get_draft, load_draft
from .models.load import LoadedModel, ModelNotFoundError, find_model_file, load_model, tiny_model
from .trees.tree import MalformedTreeError, Tree
from .verify import TreeOutput, prefill, verify_tree

__all__ = [
    "Acceptance",
    "accept_greedy",
    "accept_speculative",
    "Draft",
    "get_draft",
    "load_draft",
    "CostCurve",
    "StepCost",
    "measure_cost_curve",
    "Memory",
    "METHODS",
    "GenerationResult",
    "StepTrace",
    "generate",
    "generate_batch",
    "BatchResult",
    "make_proposer",
    "register_method",
    "KVCache",
    "LoadedModel",
    "ModelNotFoundError",
    "find_model_file",
    "load_model",
    "tiny_model",
    "MalformedTreeError",
    "Tree",
    "TreeOutput",
    "prefill",
    "verify_tree",
]
