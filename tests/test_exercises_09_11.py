"""The exercises of notebooks 09-11, run from the stored notebooks' own cells (by tag) without the real model: each
check fails on the stub and on a plausible wrong answer (ExerciseError: the copied reference call, a value copied
from scope, an answer that ignores the exercise's point), and passes on the solution."""

from __future__ import annotations

import json
import math

import pytest
from exercise_cells import NOTEBOOKS, attempt, exercise, fails, passes, run

from specdec_lab.lab.course import ExerciseError

ROOT = NOTEBOOKS.parent


def base() -> dict:
    return run("import math, json\nimport torch\nfrom specdec_lab.lab.course import check")


# ---- 09: a ratio of sums on prompts no table shows, its interval, a flat-curve replay ------------------------
def ns09() -> dict:
    ns = base()
    run(
        "from specdec_lab.bench.replay import curve_from_traces, replay_bench, traced_rows\n"
        "from specdec_lab.bench.redecide import redecide_bench\n"
        "from specdec_lab.bench.report import speedup_interval\n"
        "from specdec_lab.cost import flat_curve\n"
        "from specdec_lab.lab.course import watch\n"
        "from specdec_lab.viz.results import gap_interval",
        namespace=ns,
    )
    ns["anchors"] = json.loads((ROOT / "data/bench/avx2-tuned.json").read_text())
    ns["results"] = json.loads((ROOT / "data/bench/avx2-results-traces.json").read_text())
    ns["own"] = ns["curve_from_traces"](ns["results"])
    # section 2's paired_ratio_interval, from the notebook's own source, over the anchors file
    src = (ROOT / "notebooks/py/09_results.py").read_text(encoding="utf-8")
    start = src.index("def paired_ratio_interval(")
    end = src.index("\n\n\n", start)
    ns["FILE_OF"] = {m: ns["anchors"] for m in ("autoregressive", "prompt_lookup", "hf_generate", "hf_prompt_lookup")}
    run(src[start:end], namespace=ns)
    # section 2's ratio_on (the ratio of sums on any prompt set), from the notebook's own source: in scope for ex 1
    start = src.index("def ratio_on(")
    run(src[start : src.index("\n\n\n", start)], namespace=ns)
    return ns


def ns09_rows() -> dict:
    """Exercise 2 reads exercise 1's `rows_pl` and `rows_ar` (all 56 prompts)."""
    ns = ns09()
    ns["rows_pl"] = [r for r in ns["anchors"]["rows"] if r["method"] == "prompt_lookup"]
    ns["rows_ar"] = [r for r in ns["anchors"]["rows"] if r["method"] == "autoregressive"]
    return ns


def test_09_exercise_1_a_ratio_of_sums_over_two_categories_pooled():
    ex = exercise("09_results", 1)
    fails(ex, None, ns09)
    # the reference called: refused whatever its value
    fails(ex, "answer = summarize([r for r in rows_pl + rows_ar if r['category'] in pooled], "
          "['autoregressive', 'prompt_lookup'])['prompt_lookup']['speedup']", ns09)  # fmt: skip
    # section 2's ratio_on in scope computes exactly this ratio of sums: watched, so refused
    fails(ex, "answer = ratio_on(anchors, {r['question_id'] for r in rows_pl if r['category'] in pooled}, "
          "'prompt_lookup', 'autoregressive')[0]", ns09)  # fmt: skip
    # the value in scope: the whole run's speedup, not the two categories'
    fails(ex, "answer = anchors['summary']['prompt_lookup']['speedup']", ns09)
    # the mean of the two categories' speedups, not one ratio of sums over their prompts
    fails(ex, "answer = sum(anchors['summary']['prompt_lookup']['by_category'][c]['speedup'] for c in pooled) / 2",
          ns09)  # fmt: skip
    # the mean of per-prompt ratios
    fails(ex, "ar = {r['question_id']: r['tokens_per_s'] for r in rows_ar}\n"
          "mine = [r for r in rows_pl if r['category'] in pooled]\n"
          "answer = sum(r['tokens_per_s'] / ar[r['question_id']] for r in mine) / len(mine)", ns09)  # fmt: skip
    passes(ex, ns09)


def test_09_exercise_2_the_interval_computed_not_called():
    ex = exercise("09_results", 2)
    fails(ex, None, ns09_rows)
    fails(ex, "answer = speedup_interval(rows_pl, rows_ar)", ns09_rows)  # the reference called
    # section 3's gap interval, in scope, with a theory of zero: the same bootstrap, watched too
    fails(ex, "answer = gap_interval(rows_pl, rows_ar, lambda rows: 0.0)", ns09_rows)
    # section 2's two-file bootstrap, pointed at one file: the same draws, watched too
    fails(ex, "answer = paired_ratio_interval('prompt_lookup', 'autoregressive')", ns09_rows)
    # exercise 1's `summarize`, in scope, stores this very interval as "speedup_95": watched here too
    from_summary = ("answer = tuple(summarize(rows_pl + rows_ar, ['autoregressive', 'prompt_lookup'])"
                    "['prompt_lookup']['speedup_95'])")  # fmt: skip
    ns = ns09_rows()
    assert "summarize" not in ns  # exercise 1 not run here: the stub imports `summarize` itself, and watches it
    with pytest.raises(ExerciseError, match="called `summarize`"):
        attempt(ex, ns, from_summary)
    # what stops it is the watch: without `summarize` among the watched names, the one call passes
    unwatched = {**ex, "exercise": ex["exercise"].replace(', "summarize")', ")")}
    assert unwatched["exercise"] != ex["exercise"]
    attempt(unwatched, ns09_rows(), from_summary)
    boot = ("rate = lambda rs: sum(r['new_tokens'] for r in rs) / sum(r['seconds'] for r in rs)\n"
            "by = {r['question_id']: r for r in rows_ar}\n"
            "pairs = [(r, by[r['question_id']]) for r in rows_pl]\n"
            "n, rng, ratios = len(pairs), random.Random(SEED), []\n"
            "for _ in range(2000):\n"
            "    DRAW\n"
            "ratios.sort()\n"
            "answer = (ratios[int(0.025 * 1999)], ratios[round(0.975 * 1999)])")  # fmt: skip
    paired = ("s = [pairs[i] for i in rng.choices(range(n), k=n)]; "
              "ratios.append(rate([m for m, _ in s]) / rate([b for _, b in s]))")  # fmt: skip
    unpaired = ("ratios.append(rate([pairs[i][0] for i in rng.choices(range(n), k=n)]) / "
                "rate([pairs[i][1] for i in rng.choices(range(n), k=n)]))")  # fmt: skip
    # prompts resampled apart: the prompt-lookup and autoregressive rows drawn independently
    fails(ex, boot.replace("SEED", "0").replace("DRAW", unpaired), ns09_rows)
    # another random stream: near the reference, not on it
    fails(ex, boot.replace("SEED", "1").replace("DRAW", paired), ns09_rows)
    run(ex["exercise"], boot.replace("SEED", "0").replace("DRAW", paired), ex["check"], namespace=ns09_rows())
    passes(ex, ns09_rows)


def test_09_exercise_3_the_flat_replay_computed_not_called():
    ex = exercise("09_results", 3)
    fails(ex, None, ns09)
    # the reference called, and the re-decided projection's re-priced column (the same number)
    fails(ex, "answer = next(r['predicted_speedup'] for r in replay_bench(results, flat_curve(t1)) "
          "if r['method'] == 'prompt_lookup')", ns09)  # fmt: skip
    fails(ex, "answer = next(r['repriced_speedup'] for r in redecide_bench(results, flat_curve(t1), reference=own) "
          "if r['method'] == 'prompt_lookup')", ns09)  # fmt: skip
    # the measured speedup: nothing re-priced
    fails(ex, "answer = results['summary']['prompt_lookup']['speedup']", ns09)
    # the reference's one-row step, summed by hand: the re-pricing the exercise asks for, called
    per_row = (
        "def rate(m):\n    mine = [r for r in traced_rows(results) if r['method'] == m]\n"
        "    return sum(r['new_tokens'] for r in mine) / sum(replay_row(r, flat_curve(t1)) for r in mine)\n"
        "answer = rate('prompt_lookup') / rate('autoregressive')"
    )
    fails(ex, per_row, ns09)
    passes(ex, ns09)


# ---- 10: what the accuracy per position buys, and the vocabulary trade-off ------------------------------------
def ns10_accuracy() -> dict:
    ns = base()
    record = json.loads((ROOT / "data/eagle/position_accuracy.json").read_text())
    ns.update(record=record, src=record["sources"])
    run("from specdec_lab.viz.eagle_figures import SOURCE_LABELS", namespace=ns)
    return ns


CHAIN = "def chain_length(a_js):\n    return {}\n\n\n".format  # chain_length(a_js), the E[L] of a chain
RANK = "def rank(accuracies):\n    return {}\n\n\n".format  # rank({name: a_js}), the names by E[L]
RIGHT_CHAIN = "math.fsum(math.prod(a_js[:j]) for j in range(len(a_js) + 1))"  # 1 + a_1 + a_1 a_2 + ...
RIGHT_RANK = "sorted(accuracies, key=lambda n: -chain_length(accuracies[n]))"
ANSWER = (  # the table's answer and order, through the two functions
    "answer = {n: chain_length(s['accuracy'][:k_chain]) for n, s in src.items()}\n"
    "order = rank({n: s['accuracy'][:k_chain] for n, s in src.items()})"
)


def test_10_exercise_1_chain_tokens_per_step_from_position_accuracy():
    ex = exercise("10_eagle", 1)
    fails(ex, None, ns10_accuracy)
    right = CHAIN(RIGHT_CHAIN) + RANK(RIGHT_RANK)
    passes({**ex, "solution": right + ANSWER}, ns10_accuracy)  # the functions above are a right answer
    # every position counted on its own, not only once the earlier ones hit
    fails(ex, CHAIN("1 + sum(a_js)") + RANK(RIGHT_RANK) + ANSWER, ns10_accuracy)
    # the products right, the bonus left out: not notebook 00's L
    fails(ex, CHAIN("sum(math.prod(a_js[:j]) for j in range(1, len(a_js) + 1))") + RANK(RIGHT_RANK) + ANSWER,
          ns10_accuracy)  # fmt: skip
    # the reference called on a chain: refused whatever its value
    ref = "expected_length([(0,) * d for d in range(1, len(a_js) + 1)], [[a] for a in a_js])"
    fails(ex, CHAIN(ref) + RANK(RIGHT_RANK) + ANSWER, ns10_accuracy)
    # ... and called by `rank` alone, on the check's own table (the table's order typed in): refused there
    answer_typed = (
        "answer = {n: chain_length(s['accuracy'][:k_chain]) for n, s in src.items()}\n"
        "order = sorted(answer, key=lambda n: -answer[n])"
    )
    rank_ref = RANK("sorted(accuracies, key=lambda n: -" + ref.replace("a_js", "accuracies[n]") + ")")
    with pytest.raises(ExerciseError, match="ranked by E\\[L\\].*called `expected_length`"):
        attempt(ex, ns10_accuracy(), CHAIN(RIGHT_CHAIN) + rank_ref + answer_typed)
    # the right E[L], then a ranking: only the one by E[L] passes, not one by the summed accuracies (no products),
    # by the last position's accuracy, or reversed; a yes/no or a tuple in place of the ranking is refused
    chain = CHAIN(RIGHT_CHAIN)
    for wrong_rank in ("sorted(accuracies, key=lambda n: -sum(accuracies[n]))",
                       "sorted(accuracies, key=lambda n: -accuracies[n][-1])",
                       "sorted(accuracies, key=lambda n: chain_length(accuracies[n]))",
                       "tuple(" + RIGHT_RANK + ")"):  # fmt: skip
        fails(ex, chain + RANK(wrong_rank) + ANSWER, ns10_accuracy)
    for wrong_order in ("True", "tuple(sorted(answer, key=lambda n: -answer[n]))"):
        fails(ex, right + ANSWER + f"\norder = {wrong_order}", ns10_accuracy)
    # the ranking sorted on a_1: right by luck on the table, whose order by a_1 is its order by E[L] (asserted
    # here), wrong on the check's own table, whose order by a_1 is not
    table = {n: s["accuracy"][:4] for n, s in ns10_accuracy()["src"].items()}
    assert sorted(table, key=lambda n: -table[n][0]) == sorted(
        table, key=lambda n: -math.fsum(math.prod(table[n][:j]) for j in range(5))
    )
    by_a1 = RANK("sorted(accuracies, key=lambda n: -accuracies[n][0])")
    with pytest.raises(ExerciseError, match="ranked by E\\[L\\], on the table and on the check's own"):
        attempt(ex, ns10_accuracy(), chain + by_a1 + ANSWER)
    # the table's order sorted from `answer`, `rank` left a stub: the check's own table gets no ranking
    fails(ex, chain + answer_typed, ns10_accuracy)
    passes(ex, ns10_accuracy)


def ns10_vocab() -> dict:
    from specdec_lab.eagle.vocab_cost import VocabTradeoff

    ns = base()
    tradeoff = VocabTradeoff(sizes=[1024, 4096, 8192, 49152], c=[0.06, 0.066, 0.073, 0.248],
                             coverage=[0.82, 0.94, 0.973, 1.0], head_share=0.21, held_tokens=1000)  # fmt: skip
    ns.update(tradeoff=tradeoff, alpha=0.6, shipped_m=8192)
    return ns


def test_10_exercise_2_the_vocabulary_that_buys_the_most():
    ex = exercise("10_eagle", 2)
    fails(ex, None, ns10_vocab)
    # the coverage ignored: a drafter could name every token
    fails(ex, "answer = {m: max([1.0] + [(1 - alpha ** (k + 1)) / (1 - alpha) / (k * c + 1) for k in range(1, 17)]) "
          "for m, c in zip(tradeoff.sizes, tradeoff.c)}\nbest = max(answer, key=answer.get)", ns10_vocab)  # fmt: skip
    # the reference called: refused whatever its value
    fails(ex, "answer = {m: chain_speedup(alpha * cov, c)[0] for m, c, cov in "
          "zip(tradeoff.sizes, tradeoff.c, tradeoff.coverage)}\nbest = max(answer, key=answer.get)",
          ns10_vocab)  # fmt: skip
    # the verify step left out of a step's cost: k draft steps alone
    fails(ex, "answer = {m: max([1.0] + [(1 - (alpha * cov) ** (k + 1)) / (1 - alpha * cov) / max(k * c, 1e-9) "
          "for k in range(1, 17)]) for m, c, cov in zip(tradeoff.sizes, tradeoff.c, tradeoff.coverage)}\n"
          "best = max(answer, key=answer.get)", ns10_vocab)  # fmt: skip
    right = (
        "answer = {m: max([1.0] + [(1 - (alpha * cov) ** (k + 1)) / (1 - alpha * cov) / (k * c + 1) "
        "for k in range(1, 17)]) for m, c, cov in zip(tradeoff.sizes, tradeoff.c, tradeoff.coverage)}\n"
    )
    # the right speed-ups, the winner guessed as either end (here it is neither)
    for guess in ("max(tradeoff.sizes)", "min(tradeoff.sizes)"):
        fails(ex, right + f"best = {guess}", ns10_vocab)
    fails(ex, right + "best = max(answer.values())", ns10_vocab)  # the speed-up, not the M
    passes(ex, ns10_vocab)


# ---- 11: the chance each sibling is emitted, on a set where p(x) is not the answer ----------------------------
def ns11() -> dict:
    ns = base()
    run(
        "torch.set_num_threads(1)\n"
        "from IPython.display import Markdown, display\n"
        "from specdec_lab.accept.toy import residual_steps, toy_models\n"
        "from specdec_lab.lab.course import compare\n"
        "from specdec_lab.sampling import Sampling\n"
        "vocab, draft_noise = 5, 1.0\n"
        "target, draft = toy_models(vocab, noise=draft_noise)\n"
        "steps = residual_steps(target, draft, Sampling(temperature=1.0), 'deterministic', width=3)",
        namespace=ns,
    )
    return ns


def ns11_sampled() -> dict:
    """Exercise 2 after exercise 1's stub: `sampled`, the residuals of three siblings drawn from q, in scope."""
    ns = ns11()
    run(exercise("11_sampling_on_trees", 1)["exercise"], namespace=ns)
    return ns


def test_11_exercise_1_checked_where_the_target_probability_is_not_the_answer():
    ex = exercise("11_sampling_on_trees", 1)
    fails(ex, None, ns11)
    right = ("def emitted(ch):\n    out, rest = [], 1.0\n    for a in ch:\n        out.append(rest * a)\n"
             "        rest *= 1 - a\n    return out\n")  # fmt: skip
    # p(x) handed back: right for the one-hot rule (its theorem), wrong for the sampled siblings given their draw
    fails(ex, right + "answer = {name: [st['p'][x] for x in st['tokens']] for name, st in zip(chance_sets, "
          "(steps, sampled))}", ns11)  # fmt: skip
    # the deterministic half copied from p (right values), emitted left as the stub
    fails(ex, "answer = {name: [st['p'][x] for x in st['tokens']] for name, st in zip(chance_sets, (steps, sampled))}"
          "\nanswer['sampled, multi-draft rule'] = [0.0] * 3", ns11)  # fmt: skip
    fails(ex, "def emitted(ch):\n    return list(ch)\nanswer = {n: emitted(c) for n, c in chance_sets.items()}",
          ns11)  # the chances themselves  # fmt: skip
    # only the sibling just before rejected, not every earlier one
    fails(ex, "def emitted(ch):\n    return [a * (1 - ch[j - 1]) if j else a for j, a in enumerate(ch)]\n"
          "answer = {n: emitted(c) for n, c in chance_sets.items()}", ns11)  # fmt: skip
    # the reference, called
    fails(ex, "def emitted(ch):\n    first = enumerate_outcomes(lambda coins: next((j for j, a in enumerate(ch) "
          "if coins.accept(a, 1.0)), None))\n    return [first.get(j, 0.0) for j in range(len(ch))]\n"
          "answer = {n: emitted(c) for n, c in chance_sets.items()}", ns11)  # fmt: skip
    # the right P(j), the gap answered wrong: zero for both sets (the one-hot theorem taken for the sampled
    # siblings too), or read off the chances instead of P(j)
    right_p = right + "answer = {n: emitted(c) for n, c in chance_sets.items()}\n"
    fails(ex, right_p + "gap = dict.fromkeys(chance_sets, 0.0)", ns11)
    fails(ex, right_p + "gap = {n: max(abs(a - st['p'][x]) for a, x in zip(chance_sets[n], st['tokens'])) "
          "for n, st in zip(chance_sets, (steps, sampled))}", ns11)  # fmt: skip
    passes(ex, ns11)


def test_11_exercise_2_not_the_residual_printed_above():
    ex = exercise("11_sampling_on_trees", 2)
    fails(ex, None, ns11_sampled)
    right_dep = ("\nleft = (p_ctx - q_ctx).clamp(min=0.0)\nr1 = left / left.sum()\nq3 = q_ctx.clone()\nq3[x3] = 0\n"
                 "q3 = q3 / q3.sum()\nleft = (r1 - q3).clamp(min=0.0)\n"
                 "moved = float((left / left.sum() - answer).abs().sum() / 2)")  # fmt: skip
    # the residual after the first sampled sibling, in scope from exercise 1: the root's, at T = 1
    fails(ex, "answer = torch.tensor(sampled['steps'][1]['residual'])" + right_dep, ns11_sampled)
    fails(ex, "answer = residual(residual(p_ctx, q_ctx, x1), q_ctx, x2)" + right_dep, ns11_sampled)  # reference called
    # the chain's residual once: only the first rejection
    fails(ex, "left = (p_ctx - q_ctx).clamp(min=0.0)\nanswer = left / left.sum()" + right_dep, ns11_sampled)
    # the multi-draft rule twice: q left unchanged after x1 was drawn
    fails(ex, "left = (p_ctx - q_ctx).clamp(min=0.0)\nr1 = left / left.sum()\nleft = (r1 - q_ctx).clamp(min=0.0)\n"
          "answer = left / left.sum()" + right_dep, ns11_sampled)  # fmt: skip
    # q2 with x2 removed too (the third sibling's q, not the one x2 was drawn from)
    fails(ex, "left = (p_ctx - q_ctx).clamp(min=0.0)\nr1 = left / left.sum()\nq2 = q_ctx.clone()\nq2[[x1, x2]] = 0\n"
          "q2 = q2 / q2.sum()\nleft = (r1 - q2).clamp(min=0.0)\nanswer = left / left.sum()" + right_dep,
          ns11_sampled)  # fmt: skip
    # the one-hot residual twice: the rejected tokens' mass removed, q ignored
    fails(ex, "answer = p_ctx.clone(); answer[[x1, x2]] = 0; answer = answer / answer.sum()" + right_dep, ns11_sampled)
    right = ("left = (p_ctx - q_ctx).clamp(min=0.0)\nr1 = left / left.sum()\nq2 = q_ctx.clone()\nq2[x1] = 0\n"
             "q2 = q2 / q2.sum()\nleft = (r1 - q2).clamp(min=0.0)\nanswer = left / left.sum()")  # fmt: skip
    fails(ex, right + "\nmoved = 0.0", ns11_sampled)  # as on a chain: no dependence on the rejected token
    fails(ex, right + "\nmoved = True", ns11_sampled)  # a yes, not the distance
    # the distance to the residual with q unchanged (not rebuilt without x3)
    fails(ex, right + "\nleft = (r1 - q_ctx).clamp(min=0.0)\n"
          "moved = float((left / left.sum() - answer).abs().sum() / 2)", ns11_sampled)  # fmt: skip
    passes({**ex, "solution": right + right_dep}, ns11_sampled)  # the test's own right answer
    passes(ex, ns11_sampled)


def test_11_exercise_3_a_rule_that_draws_from_p_is_refused():
    ex = exercise("11_sampling_on_trees", 3)
    fails(ex, None, ns11)
    # right distribution (p itself), no sibling tried
    fails(ex, "def one_hot_rule(p, siblings, coins):\n    return coins.sample(p)\n"
          "answer = enumerate_outcomes(partial(one_hot_rule, p_root, steps['tokens']))", ns11)  # fmt: skip
    # the siblings tried right, the bonus drawn from p instead of the residual (a rejected sibling can come back)
    fails(ex, "def one_hot_rule(p, siblings, coins):\n"
          "    r = p.clone()\n"
          "    for x in siblings:\n"
          "        if coins.accept(float(r[x] / r.sum()), 1.0):\n"
          "            return x\n"
          "        r[x] = 0.0\n"
          "    return coins.sample(p)\n"
          "answer = enumerate_outcomes(partial(one_hot_rule, p_root, steps['tokens']))", ns11)  # fmt: skip
    # no renormalisation: each sibling tried with its p(x), the rejected mass kept in the bonus's draw
    fails(ex, "def one_hot_rule(p, siblings, coins):\n"
          "    for x in siblings:\n"
          "        if coins.accept(float(p[x]), 1.0):\n"
          "            return x\n"
          "    return coins.sample(p)\n"
          "answer = enumerate_outcomes(partial(one_hot_rule, p_root, steps['tokens']))", ns11)  # fmt: skip
    # section 2's trace replayed: its chances and last residual, whatever p and siblings the rule is given
    fails(ex, "def one_hot_rule(p, siblings, coins):\n"
          "    for s in steps['steps'][:-1]:\n"
          "        if coins.accept(s['accept'], 1.0):\n"
          "            return s['token']\n"
          "    return coins.sample(torch.tensor(steps['steps'][-1]['residual']))\n"
          "answer = enumerate_outcomes(partial(one_hot_rule, p_root, steps['tokens']))", ns11)  # fmt: skip
    passes(ex, ns11)


def test_11_rule_gap_is_read_against_the_counts_spread_and_turns_with_the_numbers():
    from specdec_lab.viz.sampling_trees import mean_accepted_se, rule_gap_text

    rows = json.loads((ROOT / "data/bench/accepted_temperature.json").read_text())["rows"]
    # the committed file: three short decodes per point, gaps of one sign but inside the counts' spread
    assert "within noise" in rule_gap_text(rows, "medusa", "traversal", "exact")
    # the same means over forty times the steps: the same-sign gaps now exceed the spread, an order either way
    many = [dict(r, forwards=40 * r["forwards"]) for r in rows]
    assert "traversal sits above exact" in rule_gap_text(many, "medusa", "traversal", "exact")
    assert "exact sits below traversal" in rule_gap_text(many, "medusa", "exact", "traversal")
    # no gap at all: within noise, with no order and no talk of a sign change
    flat = [dict(r, mean_accepted=1.5, forwards=10_000) for r in rows]
    text = rule_gap_text(flat, "medusa", "traversal", "exact")
    assert "within noise" in text and "change sign" not in text
    assert mean_accepted_se(1.0, 50) == 0.0 and mean_accepted_se(2.0, 2) == 1.0  # m(1 + m) / n: 2 / 2
