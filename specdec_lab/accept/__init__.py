"""Acceptance rules: given a verified tree and the target's logits at every node, which path survives.

Notation (Leviathan et al.): p = target distribution, q = draft distribution. `logits[i]` is the target's
p(. | context, path to node i), i.e. the distribution of the token that follows node i.

Every rule returns an `Acceptance`: the accepted path (tree node indices, root first, increasing) and the
bonus token — the token the target itself supplies after the last accepted node (its argmax under greedy,
a sample from p — or from the residual after a rejection — under sampling). A step therefore always emits
len(path) - 1 + 1 >= 1 tokens, so the loop can never stall.

The rules, and the proofs that they are exact:
    result.py        `Acceptance`: the accepted path and the bonus token
    chain.py         `accept_greedy` (exact for argmax decoding, any tree); `accept_speculative`: exact
                     speculative sampling on a chain (Leviathan et al. 2023, Chen et al. 2023)
    typical.py       `accept_typical`, Medusa's typical acceptance (Cai et al. 2024, 2.3.1): LOSSY under sampling
    tree_rules.py    exact sampling on branching trees, one recursion, three sibling draws: `one_hot`
                     (deterministic siblings: Medusa, Lookahead, EAGLE top-k), `multi_draft` (SpecInfer),
                     `without_replacement` (RSD); `exact` picks by the tree's `sibling_draw`
    traversal.py     Traversal Verification (arXiv 2505.12398): leaf-to-root, exact on any tree ("traversal")
    registry.py      the rules by name (`ACCEPT_RULES`), and which a method may use (`AcceptRules`)
    losslessness.py  Monte Carlo: the emitted tokens' distribution against the target's (and typical's drift)
    exactness.py     enumeration: the exact distribution a tree rule emits, every branch of its randomness
    toy.py           the tree rules side by side on a toy tree, computed exactly (notebook 11)

Every rule accepts candidate nodes only (`Tree.candidate`): nodes verified for their logits alone are
never on a path. Which rules fit which method is the method's to say (`AcceptRules`): a chain rule given
a branching tree would be wrong, so `generate` refuses the pairing before decoding starts.
"""

from .chain import accept_greedy, accept_speculative, chain_nodes
from .registry import ACCEPT_RULES, CHAIN_RULES, GREEDY_ONLY, TREE_RULES, AcceptRule, AcceptRules, get_accept_rule
from .result import Acceptance
from .traversal import accept_traversal
from .tree_rules import accept_exact, accept_multi_draft, accept_one_hot, accept_without_replacement
from .typical import TypicalRule, accept_typical, typical_rule

__all__ = [
    "Acceptance",
    "accept_greedy",
    "accept_speculative",
    "accept_typical",
    "accept_exact",
    "accept_one_hot",
    "accept_multi_draft",
    "accept_without_replacement",
    "accept_traversal",
    "typical_rule",
    "TypicalRule",
    "chain_nodes",
    "ACCEPT_RULES",
    "get_accept_rule",
    "AcceptRule",
    "AcceptRules",
    "CHAIN_RULES",
    "GREEDY_ONLY",
    "TREE_RULES",
]
