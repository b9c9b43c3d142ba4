"""The typical-acceptance sweep on a tiny model: its rows, its file, and that typical is measurably lossy where
the exact rule sits at the noise floor (the real-model run is `python -m specdec_lab.lab.typical_sweep`)."""

from __future__ import annotations

import importlib
import json

import torch
from test_sampling_methods import medusa_drafter  # tests/ is on sys.path (pytest rootdir import)

import specdec_lab as S
from specdec_lab.accept import accept_exact
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.lab.typical_sweep import FirstTokenTV, typical_sweep


def test_sweep_rows_file_and_noise_floor(tmp_path, monkeypatch):
    generate_module = importlib.import_module("specdec_lab.generate")  # the module (the package exports the function)
    calls = []  # (accept, max_new_tokens) of every decode, in order
    real_generate = generate_module.generate

    def counting(*args, **kw):
        calls.append((kw.get("accept"), kw["max_new_tokens"]))
        return real_generate(*args, **kw)

    monkeypatch.setattr(generate_module, "generate", counting)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = S.tiny_model(vocab_size=8, num_layers=2, eos_token_id=None, seed=2)
        set_cost_curve(model, CostCurve(sizes=[1, 64], seconds=[1.0, 1.0], tree=True))
        heads = medusa_drafter(model)
        out = tmp_path / "sweep.json"
        result = typical_sweep(
            model, [[1, 2, 3, 4, 1, 2]], [0.01, 0.3], temperature=1.0, max_new_tokens=8, draws=300, warmup_tokens=3,
            out=out,
            medusa=dict(heads=heads, tree="cartesian:3,2", vocab="full", accuracy="independent"), progress=False,
        )  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    rows = {row["rule"]: row for row in result["rows"]}
    # every timed config (autoregressive, exact, two typical) ran once, short and untimed, before any clock
    assert [n for _, n in calls[:4]] == [3] * 4 and calls[1][0] == "exact" and calls[4][1] == 8
    assert result["config"]["warmup_tokens"] == 3
    assert list(rows) == ["autoregressive", "exact", "typical eps=0.01", "typical eps=0.3"]
    assert all(row["tokens_per_s"] > 0 and row["mean_accepted"] >= 1.0 for row in rows.values())
    assert all(row["decode_tokens_per_s"] >= row["tokens_per_s"] for row in rows.values())  # prefill out
    assert rows["typical eps=0.3"]["delta"] == 0.3**0.5
    sampled = [row for row in rows.values() if "tv" in row]
    assert all(0 <= row["tv"] <= 1 and row["contexts"] > 0 for row in sampled)
    assert rows["typical eps=0.01"]["tv"] > rows["exact"]["tv"] + 0.05  # lossy, above the exact rule's floor
    assert json.loads(out.read_text())["rows"] == json.loads(json.dumps(result["rows"]))


def test_first_token_tv_returns_the_rules_own_acceptance():
    """The meter's extra draws use a generator of their own: the decode is the rule's, draw for draw."""
    model = S.tiny_model(vocab_size=8, num_layers=2, eos_token_id=None, seed=2)
    heads = medusa_drafter(model)
    kw = dict(
        method="medusa",
        heads=heads,
        tree="cartesian:2,2",
        vocab="full",
        accuracy="independent",
        max_new_tokens=6,
        temperature=1.0,
        seed=3,
    )
    plain = S.generate(model, [1, 2, 3, 4], **kw)
    meter = FirstTokenTV(accept_exact, draws=20)
    metered = S.generate(model, [1, 2, 3, 4], accept=meter, **kw)
    assert metered.tokens == plain.tokens and len(meter.tvs) == metered.forwards
