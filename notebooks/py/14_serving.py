# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -papermill,-execution
#     formats: ipynb,py//py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (specdec_lab)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 14 · From the workbook to a server
#
# The notebooks so far decoded with our own loop. In production a serving engine does that: vLLM takes requests
# over HTTP, batches whatever is running, and speculates with a drafter it loads from a folder. This notebook
# carries the workbook into it: the drafters trained here (the distilled draft model, the EAGLE-3 drafter) are
# exported in the layouts vLLM loads, our cost model chooses which one to serve and how many tokens to draft at
# each number of running requests, vLLM serves it, and the same measurements as before — identity with
# autoregressive decoding, acceptance per position, speed — are taken on the engine, beside our own loop.
#
# ### Learning objectives
#
# After this notebook you can:
#
# - **export** a target and its drafters as folders a serving engine loads, and read the speculative config;
# - **derive** a draft length for every batch size from measured acceptance and the step's price t(B, n);
# - **serve** a drafter with vLLM and check its greedy output token for token against our loop;
# - **read** an engine's acceptance counters and compare them with our loop's on the same prompts;
# - **explain** how throughput and latency change with concurrency, and where speculation stops paying.
#
# ### Prerequisites
#
# Notebooks 00 (the loop, the cost curve), 01 (α, k, E[L]), 10 (the EAGLE-3 drafter) and 13 (speculation in a
# batch, t(B, n)). Notation: notebook 00's table; S_i below is the share of *steps* whose draft was accepted up
# to position i, so E[L] = 1 + Σ S_i (the bonus counted, as in 00), and D_i the share of *drafts* (steps that
# drafted at all) accepted up to position i — what vLLM's counters give; S_i = D_i × the share of steps that
# drafted. (D for "per draft"; not notebook 13's r(B), a drafted token's share of a decoded token's cost.)
# vLLM's "mean acceptance length" is 1 + Σ D_i, tokens per *drafting* step: notebook 00's mean accepted (τ,
# per target forward) only where every step drafts. Serving needs vLLM in its own venv, once: `make serve-setup`.
#
# 1. the policy: which drafter and how many tokens, by batch size;
# 2. the export: folders vLLM loads;
# 3. a live server: requests from this notebook, checked against our loop;
# 4. the serving table: throughput, latency and acceptance by concurrency;
# 5. on a GPU;
#
# then questions, exercises, takeaways and further reading.

# %% tags=["parameters"]
quick: bool = False  # CI: a smaller lab for the policy and a shorter live request (same code paths)
export_dir: str = "../results/serve"  # where section 2 exports (python -m specdec_lab.serve export)
serving_file: str = "../data/bench/avx512-serving-14x64-r2.json"  # the serving bench (bench.serving)
policy_file: str = "../data/bench/avx512-serving-policy-14x64-r2.json"  # the policy re-priced by the engine (§4)
live: bool = True  # section 3 starts vLLM (needs `make serve-setup`; without it the section says so and skips)
live_method: str = "eagle3"  # what section 3 serves: ngram, draft or eagle3
live_tokens: int = 32  # new tokens per live request

# %%
if quick:
    live_tokens = 16

from specdec_lab.lab.course import start

FIGURES = start("../results/figures" if quick else "../figures", stem="14_serving")

# %% [markdown]
# ## 1. The policy: which drafter, how many tokens, at which batch size
#
# The idea first. A serving engine runs a chain: each step a drafter proposes k tokens, one forward verifies
# them, and the longest agreeing prefix plus one bonus token is emitted. Notebook 01 gave the expected tokens of a
# step; with S_i the share of steps accepted up to position i it is E[L](k) = 1 + S_1 + … + S_k, and a step of B
# requests drafting k tokens costs t(B, k + 1) plus the drafting. The speedup at B is E[L](k) · t(B, 1) divided by
# that price (`specdec_lab.serve.policy`, whose docstring has the whole formula).
#
# Two things come from measurement on this machine: S_i for each drafter, from our loop decoding a few benchmark
# prompts with a fixed chain (the lab), and t(B, n), the step's price (notebook 13's quantity; that notebook read
# it from a stored file, whose machine it prints; `export_all` measures it again here, on the machine this run
# prints). `export_all` measures both, prices every k at every B, and keeps for each method its best k at each B —
# or k = 0 where nothing pays.
#
# **Predict, then run:** on a 2-core CPU, will the best k grow or shrink from B = 1 to B = 16? Write down your
# guess before running the next cells; the sentence under the figure gives this run's answer.

# %%
from specdec_lab.serve.export import export_all

record = export_all(export_dir, quick=quick, progress=False)
rows = record["policy"]["by_batch_size"]
print(f"decided on: {record['machine']['cpu']} · {record['machine']['isa']} (this run)")
print(f"served: {record['choice']['method']} (mean predicted speedup over B: "
      f"{record['choice']['mean_predicted_speedup']:.2f}×)")  # fmt: skip

from IPython.display import Markdown, display

from specdec_lab.lab.course import compare


def el_noise(run: dict) -> float:
    """Twice the standard error of a lab run's τ (its measured mean of L, 1 + Σ S_i) over its steps, relative to τ:
    with prefix acceptance E[1(i) 1(j)] = S_max(i, j), so Var(L) = Σ_i Σ_j S_max(i, j) − (Σ S_i)²."""
    s_ = run["survival"]
    var = sum(s_[max(i, j)] for i in range(len(s_)) for j in range(len(s_))) - sum(s_) ** 2
    return 2 * (max(var, 0.0) / run["steps"]) ** 0.5 / (1 + sum(s_))


_means = {m: sum(r["methods"][m]["speedup"] for r in rows) / len(rows) for m in rows[0]["methods"]}
_chosen = record["choice"]["method"]
if _chosen in _means and len(_means) > 1:
    _runner = max((m for m in _means if m != _chosen), key=_means.get)
    _runs = {r["method"]: r for r in record["policy"]["lab"]["runs"]}
    _tol = (el_noise(_runs[_chosen]) ** 2 + el_noise(_runs[_runner]) ** 2) ** 0.5
    display(Markdown(compare(
        _means[_chosen], _means[_runner],
        f"The pick: {_chosen} at {{a:.2f}}× mean predicted speedup, clear of the runner-up {_runner} ({{b:.2f}}×) by "
        "more than the lab's sampling error.",
        f"The pick: {_chosen} at {{a:.2f}}×, tied with the runner-up {_runner} ({{b:.2f}}×): the order between them "
        "is the lab's, not a measured difference.",
        within=f"The pick: {_chosen} at {{a:.2f}}× mean predicted speedup against the runner-up {_runner} at "
        f"{{b:.2f}}× — within twice the lab's sampling error of τ ({{tol:.0%}}): a near tie that a re-measured lab "
        "could turn around.",
        rel_tol=_tol, tol=_tol,
    )))  # fmt: skip

# %%
import pandas as pd

lab = pd.DataFrame(record["policy"]["lab"]["runs"]).set_index("method")
lab["τ at k"] = 1 + lab["survival"].map(sum)  # the lab's measured mean of L: 1 + Σ S_i over its steps
lab[["k", "survival", "drafted", "draft_cost", "τ at k", "steps"]]

# %% [markdown]
# `τ at k` is 1 + Σ S_i, the lab's measured mean of L at its k (τ as in notebook 00; the policy uses it as its
# estimate of E[L]). `survival` lists S_1 … S_k (per step); `drafted` is the share of steps that drafted at all (prompt lookup proposes nothing
# where the text has no match); `draft_cost` is c, the drafter's seconds per drafted token over one target step.

# %% tags=["prediction"]
from specdec_lab.viz.serving import policy_figure

policy_figure(rows)

# %% tags=["prediction"]
from IPython.display import Markdown, display

from specdec_lab.lab.course import compare

chosen = record["choice"]["method"]
if chosen == "none":
    display(Markdown("No drafter's predicted speedup reached the margin at any batch size: the policy serves plain "
                     "decoding."))  # fmt: skip
else:
    from specdec_lab.serve.policy import MARGIN

    sizes_b = sorted(r["batch_size"] for r in rows)
    k_of = {m: {r["batch_size"]: r["methods"][m]["k"] for r in rows} for m in rows[0]["methods"]}
    ks = k_of[chosen]
    lo, hi = sizes_b[0], sizes_b[-1]
    every_b = ", ".join(f"k = {ks[b]} at B = {b}" for b in sizes_b)
    drafting_k = sorted({ks[b] for b in sizes_b if ks[b]})
    stops = [b for b in sizes_b if not ks[b]]
    shape = compare(
        ks[lo], ks[hi],
        "fewer at the widest batch than at the narrowest",
        "more at the widest batch than at the narrowest",
        within="the same k at the widest batch as at the narrowest",
    )  # fmt: skip
    if len(drafting_k) == 1 and stops:
        shape += (
            f"; wherever it drafts, k holds at {drafting_k[0]}"
            + (" (the fewest a drafting step can draft)" if drafting_k[0] == 1 else "")
            + f", so the only change with B is that at B = {', '.join(map(str, stops))} no k's predicted speedup "
            f"reached the policy's margin ({MARGIN:.2f}×, `serve.policy.MARGIN`) and it drafts nothing"
        )
    elif len(drafting_k) > 1:
        up = [(x, y) for x, y in zip(sizes_b[:-1], sizes_b[1:], strict=True) if ks[y] > ks[x]]
        shape += (
            "; k rises between " + ", ".join(f"B = {x} and B = {y}" for x, y in up)
            if up
            else "; k never rises as B grows"
        )
    # the chosen method's best predicted speedup at each B (below the margin, k = 0 is served; its best k is shown)
    best = {r["batch_size"]: (r["methods"][chosen]["k"] or r["methods"][chosen].get("best_k"),
                              r["methods"][chosen]["speedup"] if r["methods"][chosen]["k"]
                              else r["methods"][chosen].get("best_speedup")) for r in rows}  # fmt: skip
    served_speedup = {r["batch_size"]: r["methods"][chosen]["speedup"] for r in rows}  # the figure's points
    path = ", ".join(
        (f"{v:.2f}× (k = {k}) at B = {b}" if ks[b] else
         f"{served_speedup[b]:.2f}× (k = 0, plain decoding; its highest-scoring k, {k}, was predicted at {v:.2f}×, under the "
         f"margin) at B = {b}")
        for b, (k, v) in sorted(best.items()) if v is not None
    )  # fmt: skip
    others = [m for m in k_of if m != chosen]
    risers = {m: [(x, y) for x, y in zip(sizes_b[:-1], sizes_b[1:], strict=True) if k_of[m][y] > k_of[m][x]]
              for m in others}  # fmt: skip
    other_ks = "; ".join(
        f"{m}: {', '.join(str(k_of[m][b]) for b in sizes_b)}"
        + (" (rising from " + ", ".join(f"B = {x} to B = {y}" for x, y in risers[m]) + ")" if risers[m] else "")
        for m in others
    )  # fmt: skip
    none_pays = [b for b in sizes_b if all(not k_of[m][b] for m in k_of)]
    display(Markdown(
        f"For {chosen} the policy drafts {every_b}: {shape}. Its best predicted speedup by B is {path} — the "
        "figure's line; the export records t(B, n) without a spread, so these predictions are not ordered here "
        "beyond whether they reach the margin. The other drafters' served k (0 where no k reaches the margin), by B = "
        f"{', '.join(map(str, sizes_b))}: {other_ks}. "
        + (f"So this run's prices do not lower k step by step for every drafter: what they show is that at "
           f"B = {', '.join(map(str, none_pays))} no drafter's k pays." if none_pays and any(risers.values()) else
           f"At B = {', '.join(map(str, none_pays))} no drafter's k pays." if none_pays else
           "At every B measured at least one drafter has a k that pays.")
    ))  # fmt: skip

# %% [markdown]
# ## 2. The export: folders vLLM loads
#
# `python -m specdec_lab.serve export --out DIR` (what `export_all` ran in section 1) writes four things. `target/` is the
# model as a complete Hugging Face folder — the GGUF's values in fp32, with `architectures` (vLLM picks the model
# class from it), the tokenizer and the chat template. `draft/` is the distilled 2-layer draft with its low-rank
# readout folded into a plain head, and `eagle3/` the EAGLE-3 drafter in the layout vLLM's `Eagle3LlamaForCausalLM`
# reads (`d2t` maps the drafting vocabulary's rows to target ids; the config names the target layers whose hidden
# states it reads). `serve.json` holds the policy and vLLM's `--speculative-config` for it, with k by running
# requests (`num_speculative_tokens_per_batch_size`, vLLM's dynamic speculative decoding).

# %% tags=["prediction"]
import json
from pathlib import Path

for part in ("target", "draft", "eagle3"):
    files = sorted(Path(export_dir, part).iterdir())
    size = sum(f.stat().st_size for f in files) / 2**20
    print(f"{part + '/':9s} {size:7.1f} MiB  {', '.join(f.name for f in files)}")
print("\nspeculative config (serve.json):")
print(json.dumps(record["speculative_config"], indent=1).replace(str(Path(export_dir).resolve()), "<export>"))

# %% [markdown]
# ## 3. A live server, checked against our loop
#
# `specdec_lab.serve.Server` starts vLLM's OpenAI server from its own venv on a free port of 127.0.0.1 and stops
# it, with every process it forked, when the block ends. The requests send token ids — the prompt already in the
# chat template, exactly the ids our loop decodes — and ask for the new tokens' ids back, so the comparison with
# our `generate` is token for token. vLLM's `/metrics` counts, for every draft position, how many drafts were
# accepted up to there; the cell prints those rates D_i. Our loop's rates beside vLLM's, on the bench's prompts,
# are in section 4.

# %% tags=["nbval-ignore-output"]
from specdec_lab import generate, load_model
from specdec_lab.io import first_per_category, load_prompts
from specdec_lab.serve import ServeError, Server, ServerConfig
from specdec_lab.serve.client import acceptance, complete, scrape_metrics
from specdec_lab.serve.engine import serve_python

lm = load_model("smollm2-135m")
prompts = first_per_category(load_prompts(), 1)[: 2 if quick else 4]
ids = [lm.chat_ids(p.text) for p in prompts]
try:
    serve_python()
    reason = None if live else "live=False"
except ServeError as err:
    reason = str(err)
if reason:
    print(f"section 3 skipped: {reason}")
else:
    ours = [generate(lm, x, max_new_tokens=live_tokens).tokens for x in ids]
    with Server(ServerConfig(export=export_dir, method=live_method, num_speculative_tokens=3, max_num_seqs=4,
                             max_model_len=1024)) as server:  # fmt: skip
        before = scrape_metrics(server.url)
        served = [complete(server.url, x, live_tokens) for x in ids]
        spec = acceptance(before, scrape_metrics(server.url))
    same = sum(s.tokens == o for s, o in zip(served, ours, strict=True))
    print(f"vLLM {live_method} (k = 3): {same} of {len(ids)} answers equal our autoregressive decoding token for token")
    print(f"vLLM's D_i by position (share of drafts): {spec['rate_per_position']} "
          f"(tokens per drafting step, bonus counted: {spec['mean_accepted']})")  # fmt: skip
    print(lm.tokenizer.decode(served[0].tokens, skip_special_tokens=True)[:300])

# %% [markdown]
# ## 4. The serving table
#
# `python -m specdec_lab.bench.serving` ran one vLLM server per config — plain decoding, prompt lookup (`ngram`),
# the draft model and EAGLE-3 each with k = 3, and `policy`, the export's choice with its k by running requests —
# and sent benchmark prompts from every category at 1 to 16 concurrent requests, the configs rotated in each
# round. In the same run it decoded the prompts with our own `generate_batch` at B = concurrency, and with
# llama.cpp at one request. The cell prints the file's command and machine.

# %%
from specdec_lab.viz.results import machine_label

EMPTY_ARG = " '' "  # a command's empty argument (two spaces in the recorded string), shown as ''
with open(serving_file) as f:
    bench = json.load(f)
summary = bench["summary"]
cfg = bench["config"]
print(f"measured on: {machine_label(bench['machine'])} (this file's machine)\n"
      f"{len(cfg['prompts'])} prompts × {cfg['max_new_tokens']} new tokens, {cfg['repeats']} round(s) per "
      f"concurrency, the fastest kept\nread from: {Path(serving_file).name} (the command's `--out` file, stored "
      f"under data/bench)\ncommand: {bench.get('command', '(not recorded)').replace('  ', EMPTY_ARG)}")  # fmt: skip
print("the policy exported for that run (not this notebook's section 1):", json.dumps(bench["policy"]["choice"]))
# a concurrency above the number of prompts never has more requests in flight than there are prompts
in_flight = {r["concurrency"]: min(r["concurrency"], len(cfg["prompts"])) for r in summary}


def load(c: int) -> str:
    """A concurrency as reached: '16 (at most 14 in flight)' where the prompts ran out first."""
    return str(c) if in_flight.get(c, c) == c else f"{c} (at most {in_flight[c]} in flight)"


for c in sorted(c for c in in_flight if in_flight[c] < c):
    print(f"concurrency {c}: only {len(cfg['prompts'])} prompts, so at most {in_flight[c]} requests were ever in flight "
          "— its rows measure that load")  # fmt: skip

# %%
from specdec_lab.viz.serving import serving_figure, serving_speedup_figure

serving_figure(summary)

# %%
serving_speedup_figure(summary)

# %%
table = pd.DataFrame([r for r in summary if r["engine"] == "vllm"])
table.set_index(["concurrency", "config"])[["tokens_per_s", "speedup_vs_vllm_plain", "speedup_range", "ttft_median",
                                            "ttft_p90", "itl_median", "itl_p90", "identical"]]  # fmt: skip

# %% [markdown]
# Columns: `tokens_per_s` counts every request's new tokens over the wall time at that concurrency;
# `speedup_vs_vllm_plain` divides the config's fastest round by plain decoding's fastest round (the two may be
# different rounds), and `speedup_range` is the lowest and highest ratio of single rounds, each round's config
# against plain decoding in that same round. `ttft` is the time to a request's first token, `itl` the time between its tokens
# (a chunk of several accepted tokens shares its gap among them); both in seconds, median and 90th percentile.
# `identical` counts answers equal to our single-sequence autoregressive decoding.

# %%
ours_rows = pd.DataFrame([r for r in summary if r["engine"] != "vllm"])
_llama = bench.get("llamacpp")
if _llama:
    print(f"llama.cpp's weights: {_llama.get('weights', 'its own')} — a quantised file, another model than our "
          f"fp32 weights, so its greedy answers can differ from our decoding by its rounding alone: "
          f"{_llama['identical']}/{_llama['prompts']} identical.\nThe file records no logit gaps or first differing "
          "positions, so it does not show that rounding alone explains the other answers (rather than a fault in either "
          "engine); its llama.cpp row times another model's decoding, not ours.")  # fmt: skip
ours_rows.set_index(["concurrency", "engine", "config"])[["tokens_per_s", "speedup_vs_vllm_plain", "identical"]]


# %%
def by(config, engine="vllm", rows=summary):
    return {r["concurrency"]: r for r in rows if r["engine"] == engine and r["config"] == config}


statics = [c for c in ("ngram", "draft", "eagle3") if by(c)]
conc = sorted(by("none"))
best_static = {c: max(statics, key=lambda m: by(m)[c]["speedup_vs_vllm_plain"]) for c in conc}
first, last = conc[0], conc[-1]
a, b = (by(best_static[c])[c]["speedup_vs_vllm_plain"] for c in (first, last))


def rounds_moved(*rows) -> float:
    """How far single rounds moved these rows' ratios (their `speedup_range`s): the widest range over its top."""
    return max(((hi - lo) / hi for lo, hi in (r.get("speedup_range") for r in rows) if hi), default=0.0)


moved = rounds_moved(by(best_static[first])[first], by(best_static[last])[last])


def drafter_named(c) -> str:
    """The highest-ratio drafter at concurrency c, with the others whose single rounds overlap its own: which of
    them is fastest is not measured."""
    top_lo, top_hi = by(best_static[c])[c]["speedup_range"]
    ties = [m for m in statics if m != best_static[c] and by(m)[c].get("speedup_range")
            and by(m)[c]["speedup_range"][0] <= top_hi and top_lo <= by(m)[c]["speedup_range"][1]]  # fmt: skip
    overlapping = " and ".join(f"{m}'s" for m in ties)
    return best_static[c] + (f"; its single rounds overlap {overlapping}, so which drafter is fastest is not measured"
                             if ties else "")  # fmt: skip


display(Markdown(compare(
    a, b,
    f"With a fixed k = {cfg['k']} the highest-ratio drafter gave {{a:.2f}}× at {first} request ({drafter_named(first)}) and "
    f"{{b:.2f}}× ({drafter_named(last)}) at concurrency {load(last)}: speculation's gain fell with concurrency. This file "
    "does not split that fall between what a draft saves and what a speculative server costs whether or not it "
    "drafts (vLLM's drafter, rejection sampler and scheduler run every step); the policy table below shows a "
    "speculative server at these loads beside the drafts it actually made.",
    f"With a fixed k = {cfg['k']} the highest-ratio drafter gave {{a:.2f}}× at {first} request ({drafter_named(first)}) and "
    f"{{b:.2f}}× ({drafter_named(last)}) at concurrency {load(last)}: in this file's run concurrency did not wear the gain down.",
    f"With a fixed k = {cfg['k']} the highest-ratio drafter gave {{a:.2f}}× at {first} request ({drafter_named(first)}) and "
    f"{{b:.2f}}× ({drafter_named(last)}) at concurrency {load(last)}: within how far single rounds moved them ({{moved:.0%}}).",
    rel_tol=moved, moved=moved,
)))  # fmt: skip

# %% [markdown]
# ### The policy, priced by the engine
#
# The `policy` rows above serve what our cost model chose from our loop's t(B, n). The engine's step is not our
# loop's: vLLM also runs its drafter, its rejection sampler and its scheduler every step, none of which is in
# t(B, n). So the export was decided a second time with the engine's prices (`serve export --engine-prices FILE`,
# FILE being the serving bench's file above): at each B, each method's predicted speedup is scaled by the ratio
# vLLM measured for it there (`serve.policy.engine_corrections`), and the bench ran plain decoding and the
# re-priced policy again. Whether that re-pricing paid is a measurement: the cells below print both schedules and
# compare them against how far the same server at the same k moved between the two files.

# %%
with open(policy_file) as f:
    repriced = json.load(f)
print(f"measured on: {machine_label(repriced['machine'])} (this file's machine)\n"
      f"read from: {Path(policy_file).name} (the command's `--out` file, stored under data/bench)\n"
      f"command: {repriced.get('command', '(not recorded)').replace('  ', EMPTY_ARG)}\n"
      f"its export was priced with the engine's ratios from: "
      f"{repriced['policy'].get('engine_prices', '(not recorded)')}")  # fmt: skip
print(
    "method and schedule, cost model alone ([first B, last B, k]):",
    bench["policy"]["choice"]["method"],
    bench["policy"]["schedule"],
)
print(
    "method and schedule, engine-priced      ([first B, last B, k]):",
    repriced["policy"]["choice"]["method"],
    repriced["policy"]["schedule"],
)
priced = by("policy", rows=repriced["summary"])
alone = by("policy")
# vLLM sets k by the requests running, so each concurrency's k is the schedule's at the requests in flight
reached = {c: min(c, len(cfg["prompts"]), len(repriced["config"]["prompts"])) for c in sorted(priced)}
drafts_at = {
    c: next(k for lo, hi, k in repriced["policy"]["schedule"] if lo <= reached[c] <= hi) for c in sorted(priced)
}
alone_k = {c: next(k for lo, hi, k in bench["policy"]["schedule"] if lo <= in_flight[c] <= hi) for c in sorted(alone)}
for_load = {c: priced[c]["speedup_vs_vllm_plain"] if drafts_at[c] else 1.0 for c in sorted(priced)}


def drafts_made(run: dict) -> dict:
    """The drafts the engine actually made for the policy server at each concurrency: (drafts, draft tokens)."""
    return {r["concurrency"]: (r.get("acceptance", {}).get("drafts", 0), r.get("acceptance", {}).get("draft_tokens", 0))
            for r in run.get("vllm", []) if r["config"] == "policy"}  # fmt: skip


made = drafts_made(repriced)
pd.DataFrame({
    "most requests in flight": reached,
    "k at most in flight, cost model alone": alone_k,
    "cost model alone": {c: alone[c]["speedup_vs_vllm_plain"] for c in sorted(alone)},
    "engine-priced": {c: priced[c]["speedup_vs_vllm_plain"] for c in sorted(priced)},
    "engine-priced range": {c: priced[c]["speedup_range"] for c in sorted(priced)},
    "k at most in flight, engine-priced": drafts_at,
    "drafts made, engine-priced": {c: made.get(c, (None, None))[0] for c in sorted(priced)},
    "draft tokens, engine-priced": {c: made.get(c, (None, None))[1] for c in sorted(priced)},
    "exported for this load": for_load,
    "identical": {c: priced[c]["identical"] for c in sorted(priced)},
}).rename_axis("concurrency")  # fmt: skip

# %% [markdown]
# `cost model alone` and `engine-priced` are each one server, its file's method with its file's schedule (both
# printed above), at every concurrency, each against plain decoding measured in its own file. vLLM picks k by the requests running at each
# step, so the `k at most in flight` columns give the schedule's k only while `most requests in flight` run — the
# concurrency, or the number of prompts where that is smaller. Once requests finish and fewer run, the schedule's k
# for that smaller batch applies: `drafts made` and `draft tokens` are what the engine's counters recorded over the
# whole run, so a row with k = 0 at most in flight may still have drafted. `exported for this load` is what
# `serve run --method auto --batch-size N` starts for N concurrent requests, N the requests in flight: that server
# where the schedule drafts at N, plain decoding where it drafts nothing at N (k = 0) — a ratio of one by
# construction there, plain decoding against itself, not a measurement.

# %%
worst_c = min(priced, key=lambda c: priced[c]["speedup_vs_vllm_plain"])
worst = priced[worst_c]
# the loads whose single rounds overlap the lowest one's: which of them is lowest is not measured
_w_lo, _w_hi = worst["speedup_range"]
tied = [c for c in sorted(priced) if priced[c]["speedup_range"][0] <= _w_hi and _w_lo <= priced[c]["speedup_range"][1]]
# the new tokens the policy server emitted at each concurrency, from the same run as `made`'s counters
served_tokens = {r["concurrency"]: r.get("tokens") for r in repriced.get("vllm", []) if r["config"] == "policy"}


def why_low(c: int) -> str:
    """What the engine's counters say at concurrency c: the schedule's k at the requests in flight, and the drafts
    the engine made there (vLLM sets k by the requests running at each step)."""
    n_drafts, n_tokens = made.get(c, (0, 0))
    served_n = served_tokens.get(c)
    counted = (
        f"{n_drafts} draft{'s' * (n_drafts != 1)} ({n_tokens} draft token{'s' * (n_tokens != 1)}"
        + (f", against the {served_n} tokens it served" if served_n else "")
        + ")"
    )
    # the largest batch below `reached` at which the schedule drafts: where k comes back as requests finish
    bands = [(hi, k) for lo, hi, k in repriced["policy"]["schedule"] if k and lo < reached[c]]
    head = f"its schedule's k at {reached[c]} requests in flight is {drafts_at[c]}"
    if drafts_at[c] == 0 and n_drafts == 0:
        return head + (", and the engine recorded no drafts there, so a speculative server paid for something even "
                       "when it drafted nothing (what, this file does not measure)")  # fmt: skip
    # an upper bound on drafting's share of the run's time: each draft token priced as a whole served token
    drafted_share = n_tokens / served_n if served_n else None
    lost = 1.0 - priced[c]["speedup_vs_vllm_plain"]
    if drafts_at[c] == 0 and drafted_share is not None and lost > 0 and drafted_share < lost:
        return (head + f", and the engine's counters record only {counted} there: even had each draft token cost "
                f"as much time as plain decoding spends on a served token, drafting would account for at most "
                f"{drafted_share:.1%} of the run's time, against the {lost:.0%} the server lost to plain decoding. "
                "So at this load a speculative server was slower than plain decoding while it hardly drafted: it paid "
                "for something other than its drafts (what, this file does not measure)")  # fmt: skip
    if drafts_at[c] == 0:
        ks_back = sorted({k for _, k in bands})
        k_text = f"{ks_back[0]}" if len(ks_back) == 1 else f"{ks_back[0]} to {ks_back[-1]}" if ks_back else ""
        return (head + f", yet the engine's counters record {counted} there: vLLM "
                "sets k by the requests running at each step"
                + (f", and once {max(bands)[0]} or fewer run (requests finish, the last wave is smaller) the schedule "
                   f"drafts again (k = {k_text} by its bands; the counters' drafts averaged {n_tokens / n_drafts:.2f} "
                   "tokens)" if bands and n_drafts else "")
                + "; this file does not split the time between drafting and not drafting")  # fmt: skip
    return (head + f"; the engine's counters record {counted} there, and together "
            "they did not pay for drafting and verifying them")  # fmt: skip


def _ratio(c: int) -> str:
    lo_, hi_ = priced[c]["speedup_range"]
    return f"concurrency {load(c)}, {priced[c]['speedup_vs_vllm_plain']:.2f}× (single rounds {lo_:.2f}–{hi_:.2f}×)"


_below = "below plain decoding, by more than single rounds moved it ({moved:.0%})"
if len(tied) > 1:
    _all_rounds = all(priced[c]["speedup_range"][1] < 1.0 for c in tied)
    lowest = (f"the one-server policy's ratio to vLLM plain was lowest at {', and '.join(map(_ratio, tied))}: their "
              "single rounds overlap, so which of these loads is lowest is not measured. "
              + ("At each, every single round was below plain decoding." if _all_rounds
                 else f"The lowest is {_below}."))  # fmt: skip
    reasons = " ".join(f"At concurrency {load(c)}, {why_low(c)}." for c in tied)
else:
    lowest = f"the one-server policy's ratio to vLLM plain was lowest at {_ratio(worst_c)}, {_below}."
    reasons = f"At that load, {why_low(worst_c)}."
display(Markdown(compare(
    worst["speedup_vs_vllm_plain"], 1.0,
    f"Priced by the engine, the one-server policy was faster than vLLM plain at every concurrency measured; its "
    f"lowest ratio was {{a:.2f}}× (at concurrency {load(worst_c)}).",
    f"Priced by the engine, {lowest} {reasons}",
    within=f"Priced by the engine, the one-server policy's lowest ratio to vLLM plain was {{a:.2f}}× at concurrency "
    f"{load(worst_c)}: level with plain decoding, within how far single rounds moved it ({{moved:.0%}}).",
    rel_tol=rounds_moved(worst), moved=rounds_moved(worst),
)))  # fmt: skip
# exported for each load: plain decoding where the schedule drafts nothing (1.00× by construction, not measured
# against anything), the one-server policy where it drafts: only those loads say how the export did
drafting = [c for c in for_load if drafts_at[c]]
plain_loads = [c for c in for_load if not drafts_at[c]]
by_construction = (
    f" At concurrency {', '.join(map(load, plain_loads))} it serves plain decoding itself: 1.00× by construction, "
    "not a measurement."
    if plain_loads
    else ""
)
if drafting:
    low_c = min(drafting, key=for_load.get)
    display(Markdown(compare(
        for_load[low_c], 1.0,
        f"Exported for each load, the policy's lowest ratio where it drafts is {{a:.2f}}× (at concurrency "
        f"{load(low_c)}): faster than plain decoding at every load where it drafts.",
        f"Exported for each load, the policy's lowest ratio where it drafts is {{a:.2f}}× (at concurrency "
        f"{load(low_c)}): below plain decoding by more than single rounds moved it ({{moved:.0%}}).",
        within=f"Exported for each load, the policy's lowest ratio where it drafts is {{a:.2f}}× (at concurrency "
        f"{load(low_c)}): level with plain decoding, within how far single rounds moved it ({{moved:.0%}}).",
        rel_tol=rounds_moved(priced[low_c]), moved=rounds_moved(priced[low_c]),
    ) + by_construction))  # fmt: skip
else:
    display(Markdown("Exported for each load, the policy drafts at no load measured:" + by_construction))

# %%
# did pricing on the engine pay? Measured against measured: the two one-server ratios at each load where the engine's
# prices changed k, judged against the noise between the two files — the larger of how far single rounds moved them
# at that concurrency and how far the same server at the same k moved between the files (the no-effect control)
same_k = [c for c in priced if c in alone and drafts_at[c] == alone_k[c]]


def drift(c: int) -> float:
    """How far the same server moved between the two files at concurrency c, over the smaller (`compare`'s scale)."""
    pa, aa = priced[c]["speedup_vs_vllm_plain"], alone[c]["speedup_vs_vllm_plain"]
    return abs(pa - aa) / min(pa, aa)


files_drift = max((drift(c) for c in same_k), default=0.0)  # 0 where no load kept its k: no control
changed = [c for c in priced if c in alone and drafts_at[c] != alone_k[c]]
verdicts = []
for c in changed:
    noise_c = max(rounds_moved(priced[c], alone[c]), files_drift)
    kk = f"at concurrency {load(c)}, k at most in flight {alone_k[c]} → {drafts_at[c]}: {{a:.2f}}× against {{b:.2f}}×"
    v = compare(
        priced[c]["speedup_vs_vllm_plain"], alone[c]["speedup_vs_vllm_plain"],
        kk + ", engine pricing faster beyond the noise ({moved:.0%})",
        kk + ", engine pricing slower beyond the noise ({moved:.0%})",
        within=kk + ", within the noise there ({moved:.0%})",
        rel_tol=noise_c, moved=noise_c,
    )  # fmt: skip
    if not drafts_at[c]:
        v += (" (exported for that load, the engine's prices start plain decoding instead: 1.00× by construction, not "
              "measured)")  # fmt: skip
    verdicts.append(v)
gained = sum("engine pricing faster" in v for v in verdicts)
head = ""
if same_k:
    floor_c = max(same_k, key=drift)
    head = (f"Between the two files the same server at the same k moved by up to {drift(floor_c):.0%} (at concurrency "
            f"{load(floor_c)}): a change the prices made counts only beyond that drift or how far single rounds moved "
            "the two ratios, whichever is larger (the noise below). ")  # fmt: skip
else:
    head = ("No load kept its k between the two files, so there is no same-server control for the files' drift: the "
            "noise below is how far single rounds moved the two ratios alone. ")  # fmt: skip
if not changed:
    display(Markdown(head + "The engine's prices changed k at no load measured: re-pricing changed nothing here."))
else:
    tail = (
        "In this run, pricing on the engine made the server faster at no load where it changed k."
        if gained == 0
        else f"Pricing on the engine made the server faster beyond the noise at {gained} of {len(changed)} "
        "loads where it changed k."
    )
    display(Markdown(head + "The one-server ratios, measured in both files, where the engine's prices changed k: "
                     + "; ".join(verdicts) + ". " + tail))  # fmt: skip

# %% [markdown]
# ### Acceptance: the engine's counters against our loop
#
# Same prompts, same drafter, same k: vLLM's per-position counters beside our loop's traces, both as D_i, the
# share of drafts accepted up to position i (not S_i, which is per step: prompt lookup drafts at only some steps). The
# second table repeats EAGLE-3's with the prompts sent as raw text, without the chat template — what a client
# that posts `"prompt": "<text>"` to `/v1/completions` measures.

# %%
from specdec_lab.viz.serving import acceptance_figure

c1 = {r["config"]: r for r in summary if r["engine"] == "vllm" and r["concurrency"] == conc[0]}
vllm_rates = {m: c1[m]["vllm_rate_per_position"] for m in statics}
ours_rates = {m: c1[m]["ours_rate_per_position"] for m in statics}
acceptance_figure(vllm_rates, ours_rates)

# %%
gap = {m: max(abs(v - o) for v, o in zip(vllm_rates[m], ours_rates[m], strict=True)) for m in statics}
# the drafts behind each share: the engine's counter, and our lab's steps × the share of them that drafted
vllm_drafts = {m: next(r["acceptance"]["drafts"] for r in bench["vllm"] if r["config"] == m and r["concurrency"] == conc[0])
               for m in statics}  # fmt: skip
ours_drafts = {m: round(bench["lab"][m]["steps"] * bench["lab"][m]["drafted"]) for m in statics}


def two_se(p1: float, n1: int, p2: float, n2: int) -> float:
    """Twice the standard error of the difference of two shares, p1 over n1 drafts and p2 over n2."""
    return 2 * (p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2) ** 0.5


beyond = [(m, i + 1, v, o) for m in statics for i, (v, o) in enumerate(zip(vllm_rates[m], ours_rates[m], strict=True))
          if compare(v, o, "beyond", "beyond", "within", rel_tol=two_se(v, vllm_drafts[m], o, ours_drafts[m])
                     / max(min(v, o), 1e-12)) == "beyond"]  # fmt: skip
loops_agree = not beyond
display(pd.DataFrame({"vLLM": vllm_rates, "ours": ours_rates, "largest gap": gap,
                      "twice the sampling error at the largest gap": {
                          m: round(max(((two_se(v, vllm_drafts[m], o, ours_drafts[m]), abs(v - o))
                                        for v, o in zip(vllm_rates[m], ours_rates[m], strict=True)),
                                       key=lambda t: t[1])[0], 4)
                          for m in statics},
                      "drafts, vLLM / ours": {m: f"{vllm_drafts[m]} / {ours_drafts[m]}" for m in statics}}
                     ).rename_axis("method"))  # fmt: skip
# the two runs are paired (same prompts, same drafter and k, identical greedy answers): where they counted different
# numbers of drafts, the two proposers did not draft at the same steps
drafts_differ = [m for m in statics if vllm_drafts[m] != ours_drafts[m]]
display(Markdown(
    f"Position by position, the engine's D_i and our loop's differ by at most {max(gap.values()):.4f} "
    f"({max(gap, key=gap.get)}); "
    + ("every difference is within twice the sampling error of two independent shares (each over its own drafts). "
       "The two runs are not independent samples, though: they decode the same prompts to the same greedy tokens "
       "with the same drafter and k, so their difference is not sampling noise, and this band is too wide to show "
       "that they agree — only that no difference is large beside it; the file keeps no per-prompt counters for the "
       "paired test the runs call for (notebook 10 names the same limit)"
       + (". They also counted different numbers of drafts for " + ", ".join(
           f"{m} ({vllm_drafts[m]} against {ours_drafts[m]})" for m in drafts_differ)
          + ": the two proposers did not draft at exactly the same steps." if drafts_differ else ".")
       if loops_agree else
       "beyond twice the sampling error of two independent shares at "
       + ", ".join(f"{m} position {i} ({v:.4f} against {o:.4f})" for m, i, v, o in beyond)
       + ": there the engine's counters and our loop's traces differ by more than this many drafts explain.")
))  # fmt: skip

# %%
raw = bench.get("raw_text")
chat_rate = vllm_rates["eagle3"][0]
raw_rate = raw["vllm"]["rate_per_position"][0]
pd.DataFrame({"vLLM": {"chat template": vllm_rates["eagle3"], "raw text": raw["vllm"]["rate_per_position"]},
              "ours": {"chat template": ours_rates["eagle3"],
                       "raw text": [round(x / raw["ours"]["drafted"], 4) for x in raw["ours"]["survival"]]}})  # fmt: skip

# %%
import math


def share_noise(p1: float, n1: int, p2: float, n2: int) -> float:
    """Twice the standard error of the difference of two shares, p1 over n1 drafts and p2 over n2, relative to
    the smaller share: `compare`'s rel_tol for "within sampling error" (its band is rel_tol × the smaller)."""
    se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    return 2 * se / min(p1, p2)


chat_drafts = next(r["acceptance"]["drafts"] for r in bench["vllm"]
                   if r["config"] == "eagle3" and r["concurrency"] == conc[0])  # fmt: skip
raw_drafts = raw["vllm"]["drafts"]


display(Markdown(compare(
    chat_rate, raw_rate,
    "Sent as raw text, EAGLE-3's first position is accepted less often ({b:.2f} against {a:.2f} in the chat "
    "template): the drafter was distilled on chat-formatted answers, so a client that skips the template measures "
    "a weaker drafter.",
    "Sent as raw text, EAGLE-3's first position is accepted no less often ({b:.2f} against {a:.2f} in the chat "
    "template): skipping the template did not cost the engine acceptance here.",
    within="Sent as raw text, EAGLE-3's first position is accepted about as often ({b:.2f} over {n2} drafts, "
    "against {a:.2f} over {n1} in the chat template; a difference within twice the sampling error of the two "
    "shares): in this run the prompt's format made no difference beyond sampling error.",
    rel_tol=share_noise(chat_rate, chat_drafts, raw_rate, raw_drafts), n1=chat_drafts, n2=raw_drafts,
)))  # fmt: skip

# %% [markdown]
# Then how do the engine's EAGLE-3 counters compare with the drafter's held-out accuracy? Notebook 10's section 1
# (`data/eagle/position_accuracy.json`, the number notebook 10 compares proposers by) and the training record
# (`data/eagle/smollm2-135m/manifest.json`, another subset of the same held-out set) give its held-out *accuracy*
# per position (notebook 10's a_i): the
# share of scored tokens where position i's top-1 guess is the target's, teacher-forced — the true tokens before
# it fed in, whether or not the drafter would have guessed them — on distilled answers to held-out training
# prompts. The counters give D_i, the share of drafts accepted up to position i, on the bench's prompts. The
# closest the counters come to the record's quantity is the ratio D_i / D_(i−1): position i accepted given the
# positions before it were, so its inputs were the right tokens too — still a different quantity (the ratio counts
# only drafts whose earlier guesses were all right, a selected set of contexts; the record counts every scored
# token) on different prompts:

# %%
with open("../data/eagle/smollm2-135m/manifest.json") as f:
    manifest = json.load(f)
with open("../data/eagle/position_accuracy.json") as f:
    nb10_record = json.load(f)
# the reference: notebook 10's section 1 (its scored tokens per position known), the training record beside it
heldout = nb10_record["sources"]["eagle"]["accuracy"]
heldout_tokens = nb10_record["sources"]["eagle"]["count"][0]  # scored response tokens at position 1
survival = [1.0, *vllm_rates["eagle3"]]
conditional = [round(survival[i + 1] / survival[i], 4) for i in range(len(survival) - 1)]
pd.DataFrame({"vLLM D_i (per draft)": vllm_rates["eagle3"], "vLLM D_i / D_(i-1)": conditional,
              f"notebook 10, section 1 ({nb10_record['examples']} held-out examples)": heldout[: len(conditional)],
              "training record (held-out, its own subset)": manifest["heldout_accuracy_by_position"][: len(conditional)]},
             index=pd.Index(range(1, len(conditional) + 1), name="position"))  # fmt: skip

# %%
heldout_counts = nb10_record["sources"]["eagle"]["count"]  # scored response tokens at each position
# position i's ratio D_i / D_(i-1) rests on the drafts that reached it: D_(i-1) × the engine's drafts
reached = [round(survival[i] * chat_drafts) for i in range(len(conditional))]
side = {}  # position -> "above" / "below" / "within": the engine's ratio against the held-out accuracy, signed
for i in range(min(len(conditional), len(heldout))):
    band = 2 * math.sqrt(
        conditional[i] * (1 - conditional[i]) / max(reached[i], 1) + heldout[i] * (1 - heldout[i]) / heldout_counts[i]
    )  # twice the error of the two shares
    side[i + 1] = compare(
        conditional[i],
        heldout[i],
        "above",
        "below",
        "within",
        rel_tol=band / max(min(conditional[i], heldout[i]), 1e-12),
    )  # compare's band: rel_tol × the smaller
# what the earlier vLLM-against-ours table showed (`loops_agree`: every position within twice the sampling error)
engines = ("Our loop on the same prompts gives the engine's D_i within the band of two independent shares (the "
           "vLLM-against-ours table earlier in this section), a loose test for two paired runs, so this run cannot "
           "say how much of the gap lies between the two engines rather than between two prompt sets and two "
           "closely related quantities." if loops_agree else
           "Our loop on the same prompts differs from the engine beyond sampling error at some positions (the "
           "vLLM-against-ours table earlier in this section), so part of the gap may lie between the two engines "
           "too.")  # fmt: skip


def positions(which: str) -> str:
    return ", ".join(
        f"{i} ({conditional[i - 1]:.3f} against {heldout[i - 1]:.3f}, over {reached[i - 1]} drafts)"
        for i in side
        if side[i] == which
    )


display(Markdown(
    "Put as close to the record's quantity as the counters allow, position by position, the engine's D_i / D_(i−1) "
    "against notebook 10's held-out accuracy (each judged against twice the sampling error of its two shares: the "
    f"engine's drafts that reached that position, notebook 10's {heldout_tokens} scored tokens there): "
    + "; ".join(f"{label} at position{'s' * (list(side.values()).count(which) > 1)} {positions(which)}"
                for which, label in
                (("below", "below it"), ("above", "above it"), ("within", "within sampling error"))
                if any(v == which for v in side.values()))
    + (". The gaps take both signs, so no one offset between the two prompt sets describes them. "
       if {"above", "below"} <= set(side.values()) else ". ")
    + engines
))  # fmt: skip

# %% [markdown]
# ## 5. On a GPU
#
# Nothing in the export is CPU-specific: the same folders load in vLLM's CUDA build (`make serve-setup` installs
# the regular `vllm` wheel of the same version where `nvidia-smi` finds a GPU), and SGLang reads the EAGLE-3
# folder as `LlamaForCausalLMEagle3`. What changes is the price: a GPU step stays bound by reading the weights to
# a far larger B × n than two CPU cores, so `export` measured there would be expected to find k > 0 at batch sizes
# where a 2-core CPU may draft nothing — expected from the cost model, not measured in this notebook. Decide the
# policy on the machine that serves: the curve is the machine's, not the model's.

# %% [markdown]
# ## Check your understanding
#
# 1. Why does the bench send token ids rather than text, when both engines have the same tokenizer?
#
#    <details><summary>Answer</summary>Text would go through the server's own tokenization and, for
#    `/v1/completions`, no chat template: the engine would decode another sequence than our loop, and neither the
#    identity check nor the acceptance comparison would compare like with like. With ids, both engines decode the
#    same tokens from the same position.</details>
#
# 2. Why can a config that speeds one request up slow sixteen down?
#
#    <details><summary>Answer</summary>At one request a step is bound by reading the weights, so verifying k + 1
#    tokens costs far less than k + 1 separate steps (notebook 13's t(B, n) at B = 1). At sixteen the forward already processes sixteen rows and is closer to
#    compute-bound, the regime where a drafted token's share of what decoding a token costs grows (notebook 13's
#    section 2 measures that share, r(B), at every B on its file's machine, and its sentence says how much discount
#    is left), while an accepted token saves no more than before. Add the drafter's own step and vLLM's per-step
#    work, which grow with the batch too, and the rejected drafts, which are pure loss: once the drafted tokens'
#    total price passes what the accepted ones save, the config is slower. Whether and where that happened on the file's machine is section 4's serving table.</details>
#
# 3. vLLM's counter for position 2 is never above its counter for position 1. Why?
#
#    <details><summary>Answer</summary>A chain is accepted up to its first mismatch: a step whose second draft
#    is accepted had its first accepted too. The counters count prefixes, so they can only fall with
#    position.</details>

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — the expected tokens of a step
#
# From the lab's survival shares of EAGLE-3 (`method` below; `lab.loc[method, "survival"]`: S_1, S_2, … up to the
# lab's own draft length, each the share of steps whose draft was accepted up to position i), compute E[L] for a
# chain of k = 2: the tokens a step emits on
# average, the bonus included. (The table's `τ at k` is for the lab's whole k, not 2.) The check prices it with
# the policy on a flat curve (a step costs the same for any n, so the predicted speedup is E[L] when drafting is
# free). The reference is `policy.predicted_speedup`, watched here.

# %% tags=["exercise", "exercise-1"]
from specdec_lab.lab.course import watch
from specdec_lab.serve import policy

_watch = watch(globals(), "policy.predicted_speedup")  # the notebook's name `policy` becomes a view of the module
method = "eagle3"
expected_2 = ...  # a float

# %% tags=["solution", "exercise-1"]
expected_2 = 1 + sum(lab.loc[method, "survival"][:2])  # S_i already counts the steps that reached position i

# %% tags=["check", "exercise-1"]
from specdec_lab.lab.course import check

run = policy.LabRun(**{**record["policy"]["lab"]["runs"][list(lab.index).index(method)], "draft_cost": 0.0})
check("E[L] at k = 2", expected_2, _watch.begin_check()["policy.predicted_speedup"](run, 2, lambda n: 1.0),
      close=1e-9, watch=_watch,
      hint="S_i is a survival share (not a per-position rate): add S_1 and S_2 to the bonus.")  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — the schedule vLLM reads
#
# vLLM's `num_speculative_tokens_per_batch_size` is a list of `[first B, last B, k]`. Build it for the policy rows
# `my_rows` below (a made-up measurement at B = 1, 3, 6 and 12, not this run's — section 2 printed that schedule):
# each measured B's k holds up to the next measured B − 1, and the last range runs to 1024 requests. The reference
# is `policy.schedule`, watched here.

# %% tags=["exercise", "exercise-2"]
_watch = watch(globals(), "policy.schedule")  # the notebook's name `policy` becomes a view of the module
my_rows = [{"batch_size": b, "methods": {"eagle3": {"k": k}}} for b, k in ((1, 3), (3, 2), (6, 2), (12, 0))]
plan = ...  # a list of [first, last, k]

# %% tags=["solution", "exercise-2"]
sizes = [r["batch_size"] for r in my_rows]
plan = [[b, (sizes[i + 1] - 1) if i + 1 < len(sizes) else 1024, r["methods"]["eagle3"]["k"]]
        for i, (b, r) in enumerate(zip(sizes, my_rows, strict=True))]  # fmt: skip

# %% tags=["check", "exercise-2"]
check("the k-by-requests schedule", plan, _watch.begin_check()["policy.schedule"](my_rows, "eagle3"),
      close=lambda answer, reference: answer == reference, watch=_watch,
      hint="A range ends one below the next measured B; the last one ends at 1024.")  # fmt: skip

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★ — acceptance from the engine's counters
#
# Two scrapes of vLLM's `/metrics`, before and after 10 requests, are below (the counters are cumulative: the
# server had served other requests before). Compute the acceptance rate at each draft position — accepted at that
# position over the drafts (steps that drafted), not over the draft tokens — as a list in position order, and the
# tokens a drafting step emits on average, the bonus counted — 1 + the accepted draft tokens per draft, vLLM's
# "mean acceptance length" (per draft, not per target forward: notebook 00's mean accepted only where every step
# drafts). The reference is `serve.client.acceptance`, watched here.

# %% tags=["exercise", "exercise-3"]
from specdec_lab.serve.client import acceptance  # noqa: F401 - in scope (section 3), watched

_watch = watch(globals(), "acceptance")
before = {"vllm:spec_decode_num_drafts_total": 40.0, "vllm:spec_decode_num_draft_tokens_total": 120.0,
          'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"}': 20.0,
          'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"}': 9.0,
          'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="2"}': 4.0}  # fmt: skip
after = {"vllm:spec_decode_num_drafts_total": 140.0, "vllm:spec_decode_num_draft_tokens_total": 420.0,
         'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="2"}': 19.0,
         'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"}': 75.0,
         'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"}': 39.0}  # fmt: skip
rates, mean_accepted = ..., ...  # a list of 3 floats, and a float (tokens per drafting step)

# %% tags=["solution", "exercise-3"]
drafts = after["vllm:spec_decode_num_drafts_total"] - before["vllm:spec_decode_num_drafts_total"]
prefix = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
accepted = [after[f'{prefix}{{position="{i}"}}'] - before[f'{prefix}{{position="{i}"}}'] for i in range(3)]
rates = [a / drafts for a in accepted]
mean_accepted = 1 + sum(accepted) / drafts

# %% tags=["check", "exercise-3"]
import torch

reference = _watch.begin_check()["acceptance"](before, after)
check("rates per position", torch.tensor(rates, dtype=torch.float64) if isinstance(rates, list) else rates,
      torch.tensor(reference["rate_per_position"], dtype=torch.float64), close=1e-3, watch=_watch,
      hint="Subtract the scrape before; divide by the drafts; keep the positions in order.")  # fmt: skip
check("tokens per drafting step", mean_accepted, reference["mean_accepted"], close=1e-3,
      hint="The bonus token counts: 1 + ...")  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - The workbook's drafters are the engine's: the distilled draft and the EAGLE-3 drafter load in vLLM from the
#   exported folders, and greedy serving is checked token for token against our autoregressive output (section 3
#   live, the `identical` columns of section 4's tables: how many answers matched).
# - The policy is the workbook's cost model: acceptance per position and a step's price choose the drafter and a
#   k for every number of running requests, handed to vLLM as its dynamic schedule — k = 0 where drafting does
#   not pay. Our loop's t(B, n) does not see vLLM's own per-step work; re-pricing the schedule with the engine's
#   measured ratios is meant to take it in, but whether that paid is a measurement, not a given — the verdict under
#   section 4's policy table, against how far single rounds and the two files moved.
# - The engine's acceptance counters and our loop's traces count the same quantity, the per-draft rates D_i, when
#   both see the same token ids (section 4 sets the two side by side, against a band for independent samples that is
#   looser than these paired runs call for); a drafter's training record is a closely related but different quantity (accuracy given the
#   positions before, teacher-forced) on other prompts, so it is no forecast of an engine's counters.
# - Concurrency can wear speculation down: the wider the batch, the less a draft saves, and a speculative server
#   also carries per-step work of its own whether or not it drafts, so a fixed k that pays for one request can lose
#   at many — which is why the exported schedule sets k by running requests, down to k = 0; section 4 measures
#   where that happened on the file's machine.
#
# ## Further reading
#
# - Kwon et al., [vLLM and PagedAttention](https://arxiv.org/abs/2309.06180): the engine's memory manager and
#   batching.
# - vLLM's [dynamic speculative decoding](https://github.com/vllm-project/vllm/blob/015a47e1282c9ef40d706ee3463cb699e04e93c0/docs/features/speculative_decoding/dynamic_speculative_decoding.md):
#   the draft length by running requests, as exported here.
# - Li et al., [EAGLE-3](https://arxiv.org/abs/2503.01840): the drafter served here, and its layer features.
# - Leviathan et al., [speculative decoding](https://arxiv.org/abs/2211.17192): the expected tokens of a step.
