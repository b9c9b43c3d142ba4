"""Token trees: the `Tree` every proposer proposes and the target verifies, and the best tree for a budget.

    tree.py        Tree: node tokens + parent pointers, ancestor mask, depths, paths (the loop's one input)
    paths.py       rank paths (r_1, ..., r_d), prefix-closed sets of them, medusa_choices files, tree specs
    accuracy.py    a[d, i]: how often depth d's rank-i candidate is right (independent / conditional models)
    confidence.py  c_d(p): how often a candidate given probability p is right (calibrated, monotone)
    build.py       E[L] = 1 + Σ_v Π a; greedy, dynamic-programming and brute-force trees of n nodes
    budget.py      the node budget n maximising E[L](n) / step seconds on the cost model, E[L] corrected by
                   what the run's trees accepted (`DepthCorrection`)
    dynamic.py     each step's tree best-first on calibrated path probability, cut where the rate peaks
    expand.py      the same for a drafter whose candidates depend on the node (EAGLE-2): best nodes expanded
                   level by level, one drafter call per level

Nothing here knows what proposes the candidates: Medusa's heads (`medusa/`), an EAGLE drafter or a hybrid
proposer name their candidates by rank and hand these functions their accuracies, confidence and costs.
"""

from .accuracy import MISSING_RANK, HeadAccuracies, calibrate_from_ranks
from .budget import BudgetChoice, DepthCorrection, TreeOption, choose_budget, pick_budget, tree_options
from .build import brute_force_tree, expected_length, greedy_steps, greedy_tree, node_values, optimal_tree
from .confidence import DEFAULT_EDGES, HeadConfidence, confidence_from_probs
from .dynamic import StepTree, dynamic_tree
from .expand import expanded_tree
from .paths import (
    RankPath,
    cartesian_paths,
    cartesian_size,
    check_paths,
    normalize_paths,
    parse_tree,
    read_choices,
    write_choices,
)
from .tree import MalformedTreeError, Tree

__all__ = [
    "Tree",
    "MalformedTreeError",
    "RankPath",
    "cartesian_paths",
    "cartesian_size",
    "check_paths",
    "normalize_paths",
    "parse_tree",
    "read_choices",
    "write_choices",
    "HeadAccuracies",
    "MISSING_RANK",
    "calibrate_from_ranks",
    "HeadConfidence",
    "DEFAULT_EDGES",
    "confidence_from_probs",
    "node_values",
    "expected_length",
    "greedy_steps",
    "greedy_tree",
    "optimal_tree",
    "brute_force_tree",
    "BudgetChoice",
    "TreeOption",
    "DepthCorrection",
    "tree_options",
    "pick_budget",
    "choose_budget",
    "StepTree",
    "dynamic_tree",
    "expanded_tree",
]
