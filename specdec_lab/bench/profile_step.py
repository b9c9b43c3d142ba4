"""Where a decoding step's time goes: torch's profiler over greedy tokens of one or more builds, top ops each.

    python -m specdec_lab.bench.profile_step --builds int4+head=fp32+compile,int4+compile --tokens 32 \\
        --out data/bench/profile-head.json

A build is the bench's (`builds`: weights[+head=H][+compile[+unfused]]). Every build is loaded, then
`--repeats` times each build in turn (the order rotated per repeat) warms its step up on the prompt
(compilation is not a step's cost) and decodes `--tokens` greedy tokens of plain
autoregressive decoding run under `torch.profiler` (CPU activities), from the first step after the prompt's
forward (the prefill is not a decoding step). The file keeps per build the
tokens/s of the profiled decode, ms per token, the bytes a step reads (`cost.memory_wall.step_bytes`) and
the top ops by self CPU time — name, calls per token, self ms per token, µs per call — so "the head is 40%
of the step" is read off a file, with the machine that measured it. The profiler adds per-op overhead:
compare builds within one file, not its tokens/s with the bench's. Per build the run of median ms per token is
kept, with every run's ms per token beside it (their spread is the profile's noise).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from ..cost.memory_wall import step_bytes
from ..io import write_json
from ..machine import machine_info
from .builds import Build, parse_build

__all__ = ["profile_build", "main"]

PROMPT = "Write a Python function that returns the squares of a list of numbers."


def _load(model: str, build: Build):
    """(LoadedModel, its compiled step or False) for `build`."""
    from ..models.compiled import compiled_step
    from ..models.load import load_model

    head = {"head_weights": build.head} if build.head else {}
    lm = load_model(model, weights=build.weights, **head)
    return lm, (compiled_step(lm.model, fuse=build.fuse) if build.compile else False)


def profile_build(lm, step=False, tokens: int = 32, top: int = 12, prompt: str = PROMPT) -> dict:
    """Profile `tokens` greedy tokens of `lm` (a LoadedModel), verifying with `step` (a CompiledStep, or False
    for the eager model)."""
    from torch.profiler import ProfilerActivity, profile

    from ..generate import generate

    ids = lm.chat_ids(prompt)
    generate(lm, ids, max_new_tokens=tokens + 1, compile=step)  # warm-up: compiles the buckets this decode uses
    prof = profile(activities=[ProfilerActivity.CPU])
    began: list[tuple[float, int]] = []

    def after(index: int, _trace, emitted: int) -> None:  # the prompt's forward (prefill) stays out of the profile
        if index == 0:
            began.append((time.perf_counter(), emitted))
            prof.start()

    out = generate(lm, ids, max_new_tokens=tokens + 1, compile=step, on_step=after)
    seconds = time.perf_counter() - began[0][0]
    prof.stop()
    n = max(len(out.tokens) - began[0][1], 1)  # tokens decoded while profiled
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total_self = sum(e.self_cpu_time_total for e in events) or 1.0
    ops = [{"op": e.key, "calls_per_token": round(e.count / n, 2),
            "self_ms_per_token": round(e.self_cpu_time_total / 1e3 / n, 3),
            "us_per_call": round(e.self_cpu_time_total / max(e.count, 1), 1),
            "share": round(e.self_cpu_time_total / total_self, 3)} for e in events[:top]]  # fmt: skip
    return {"tokens": n, "tokens_per_s": round(n / seconds, 2), "ms_per_token": round(1e3 * seconds / n, 2),
            "step_bytes_mb": round(step_bytes(lm.model) / 1e6, 1),
            "step_bytes_mb_by_part": {k: round(v / 1e6, 1) for k, v in step_bytes(lm.model, by_part=True).items()},
            "top_ops": ops}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.profile_step", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--builds", default="int4+head=fp32+compile,int4+compile",
                   help="comma-separated builds, weights[+head=H][+compile] (bench/builds.py)")  # fmt: skip
    p.add_argument("--tokens", type=int, default=32, help="greedy tokens profiled per build")
    p.add_argument("--top", type=int, default=12, help="ops kept per build, by self CPU time")
    p.add_argument("--repeats", type=int, default=3, help="profiled decodes per build, rotated; the median's kept")
    p.add_argument("--out", default=None, help="JSON file to write (atomically); none: print only")
    a = p.parse_args(argv)
    try:
        builds = [parse_build(b) for b in a.builds.split(",") if b.strip()]
    except ValueError as err:
        print(f"profile_step: error: {err}", file=sys.stderr)
        return 2
    command = "python -m specdec_lab.bench.profile_step " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {"format": "specdec_lab.profile_step/1", "model": a.model, "machine": machine_info(),
              "command": command, "builds": {}}  # fmt: skip
    loaded = {b.name: _load(a.model, b) for b in builds}
    runs: dict[str, list[dict]] = {b.name: [] for b in builds}
    for r in range(a.repeats):  # every build once per repeat, the order rotated: a burst of load hits all alike
        for b in builds[r % len(builds) :] + builds[: r % len(builds)]:
            runs[b.name].append(profile_build(*loaded[b.name], tokens=a.tokens, top=a.top))
    for b in builds:
        ordered = sorted(runs[b.name], key=lambda x: x["ms_per_token"])
        res = {**ordered[len(ordered) // 2], "ms_per_token_runs": [x["ms_per_token"] for x in runs[b.name]]}
        record["builds"][b.name] = res  # the run of median ms per token, and every run's
        print(f"\n{b.name}: {res['tokens_per_s']} tokens/s under the profiler, {res['ms_per_token']} ms/token, "
              f"a step reads {res['step_bytes_mb']} MB")  # fmt: skip
        for op in res["top_ops"]:
            print(f"  {op['self_ms_per_token']:8.3f} ms/token  {op['calls_per_token']:7.2f} calls  "
                  f"{op['us_per_call']:8.1f} µs/call  {op['share']:6.1%}  {op['op']}")  # fmt: skip
    if a.out:
        write_json(a.out, record)
        print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
