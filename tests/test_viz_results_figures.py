"""The figures and tables of notebooks 09-12 read as a course needs: every figure titled, its legend outside the
plot area, lines that can coincide told apart by dash and marker, every number a table shows rounded, tables
narrow enough for the output area, and each results file's figures and tables labelled with the machine it names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec_lab.viz.eagle_figures import training_figure
from specdec_lab.viz.results import machine_label, ranking_frame, whatif_frame
from specdec_lab.viz.sampling_trees import (
    accepted_temperature_figure,
    joint_figure,
    residual_figure,
    sampled_frame,
    short_label,
    typical_tradeoff_figure,
)

DATA = Path(__file__).resolve().parents[1] / "data"


def _legend_outside(fig) -> bool:
    legend = fig.layout.legend
    return legend.y is not None and legend.y < 0  # below the plot area: it covers no line


# ---- the machine a results file names ---------------------------------------------------------------------------
def test_machine_label_names_cpu_isa_and_threads():
    record = {"cpu": "AMD EPYC", "isa": "AVX2", "torch_threads": 2, "device_name": "AMD EPYC"}
    assert machine_label(record) == "AMD EPYC (AVX2, 2 threads)"
    assert machine_label({"device_name": "cuda:0"}) == "cuda:0"
    assert machine_label({"cpu": "Xeon", "isa": "AVX512"}) == "Xeon (AVX512)"
    assert machine_label({}) == "unknown CPU"


def test_every_committed_bench_file_gets_a_machine_label():
    for path in sorted((DATA / "bench").glob("*.json"))[:12]:
        record = json.loads(path.read_text())
        if isinstance(record, dict) and "machine" in record:
            label = machine_label(record["machine"])
            assert label and "?" not in label, (path.name, label)


# ---- notebook 09: the measured column names its machine -------------------------------------------------------
def test_ranking_and_whatif_frames_take_the_measured_label():
    measured = {"autoregressive": 1.0, "draft": 1.2, "medusa": 1.4}
    frame = ranking_frame(measured, {"flat": {"autoregressive": 1.0, "draft": 1.5, "medusa": 1.3}}, label="measured")
    assert list(frame.index) == ["medusa", "draft", "autoregressive"]
    assert frame.loc["medusa", "rank: measured"] == 1 and frame.loc["draft", "rank: flat"] == 1
    assert "measured here" not in frame.columns
    table = [{"method": "draft", "measured_speedup": 1.2, "size": "draft length k", "recorded_size": 2.0,
              "chosen_size": 3.0, "repriced_speedup": 1.3, "predicted_speedup": 1.4}]  # fmt: skip
    wide = whatif_frame({"flat": table}, label="measured")
    assert wide.loc["draft", ("measured", "what is sized")] == "draft length k"
    assert whatif_frame({"flat": table}).loc["draft", ("measured here", "speedup")] == 1.2  # the default kept


# ---- notebook 11: titled figures, legends below, lines told apart --------------------------------------------
def test_accepted_temperature_lines_differ_in_dash_and_marker_and_the_legend_is_outside():
    rows = [{"rule": r, "siblings": "deterministic", "temperature": t, "accepted": 1.0 + t}  # identical lines
            for r in ("one_hot", "traversal", "typical") for t in (0.0, 0.7, 1.0)]  # fmt: skip
    fig = accepted_temperature_figure(rows, ("rule", "siblings"), "accepted", "toy")
    dashes = [t.line.dash for t in fig.data]
    symbols = [t.marker.symbol for t in fig.data]
    assert len(set(dashes)) == len(fig.data) and len(set(symbols)) == len(fig.data)
    assert fig.layout.title.text == "toy" and _legend_outside(fig)
    assert fig.layout.width <= 950


def test_joint_residual_and_typical_figures_are_titled_with_the_legend_outside():
    rows = [
        {"sequence": (a, b), "autoregressive": 0.25, "one_hot (deterministic)": 0.25} for a in (0, 1) for b in (0, 1)
    ]
    joint = joint_figure(rows, ["one_hot (deterministic)"])
    assert joint.layout.title.text and _legend_outside(joint)
    assert joint_figure(rows, ["one_hot (deterministic)"], title="mine").layout.title.text == "mine"
    steps = {"tokens": [1], "p": [0.5, 0.5], "q": [0.0, 1.0],
             "steps": [{"step": 0, "residual": [0.5, 0.5], "token": 1, "q_x": 1.0, "accept": 0.5},
                       {"step": 1, "residual": [1.0, 0.0], "token": None, "q_x": None, "accept": None}]}  # fmt: skip
    for step in (0, 1):
        fig = residual_figure(steps, step)
        assert fig.layout.title.text and _legend_outside(fig)
    sweep = {"rows": [{"rule": "autoregressive", "tokens_per_s": 10.0, "tv": 0.05, "tv_sem": 0.01},
                      {"rule": "exact", "tokens_per_s": 13.0, "tv": 0.05, "tv_sem": 0.01},
                      {"rule": "typical", "epsilon": 0.1, "tokens_per_s": 15.0, "tv": 0.2, "tv_sem": 0.02}],
             }  # fmt: skip
    typical = typical_tradeoff_figure(sweep)
    assert typical.layout.title.text and _legend_outside(typical)
    assert typical_tradeoff_figure(sweep, title="on X").layout.title.text == "on X"


def _record(method: str, **extra) -> dict:
    base = {"method": method, "rule": "default", "speedup": 1.3312345, "speedup_95": [1.256304, 1.421506],
            "worst_category": "qa", "worst_speedup": 1.0812, "worst_speedup_95": [0.99, 1.1712],
            "greedy_speedup": 1.5432, "kept": 0.8612, "mean_accepted": 1.3611, "greedy_mean_accepted": 1.5912,
            "decode_speedup": 1.36, "decode_speedup_95": [1.28, 1.46], "decode_worst_category": "qa",
            "decode_worst_speedup": 1.11, "decode_worst_speedup_95": [1.05, 1.16], "greedy_decode_speedup": 1.58,
            "decode_kept": 0.86}  # fmt: skip
    return base | extra


def test_sampled_frame_rounds_every_number_and_drops_the_shared_draw():
    records = [_record("prompt_lookup:temperature=0.7:top_p=0.9"),
               _record("medusa:accept=typical:temperature=0.7:top_p=0.9", rule="typical", greedy_speedup=None,
                       greedy_mean_accepted=None, kept=None)]  # fmt: skip
    frame = sampled_frame(records)
    assert list(frame.index) == ["prompt_lookup", "medusa:accept=typical"]
    assert frame.loc["prompt_lookup", "speed-up [95%]"] == "1.33 [1.26, 1.42]"
    assert frame.loc["prompt_lookup", "there [95%]"] == "1.08 [0.99, 1.17]"
    assert frame.loc["prompt_lookup", "kept"] == "86%"
    assert frame.loc["prompt_lookup", "mean accepted (greedy)"] == "1.36 (1.59)"
    assert frame.loc["medusa:accept=typical", "greedy"] == "–" and frame.loc["medusa:accept=typical", "kept"] == "–"
    assert frame.loc["medusa:accept=typical", "mean accepted (greedy)"] == "1.36"
    shown = frame.to_string()
    assert "1.256304" not in shown and "1.3312345" not in shown  # nothing unrounded
    decode = sampled_frame(records, decode=True)
    assert "mean accepted (greedy)" not in decode.columns
    assert decode.loc["prompt_lookup", "speed-up [95%]"] == "1.36 [1.28, 1.46]"
    assert decode.loc["prompt_lookup", "greedy"] == "1.58"


def test_sampled_frame_of_a_committed_run_fits_the_output_area():
    """A proxy for the rendered width: the widest row of the table as text, at about 7 px a character."""
    from specdec_lab.bench.report import by_sampling

    run = json.loads((DATA / "bench" / "avx2-t07-56-r2.json").read_text())
    greedy = [
        json.loads((DATA / "bench" / name).read_text()) for name in ("avx2-nine-56-r2.json", "avx2-repeats2.json")
    ]
    for decode in (False, True):
        frame = sampled_frame(by_sampling(run, greedy_runs=greedy), decode=decode)
        widest = max(len(line) for line in frame.to_string().splitlines())
        assert widest * 7 < 950, (decode, widest)


@pytest.mark.parametrize(
    ("label", "short"),
    [("medusa:accept=typical:temperature=0.7:top_p=0.9", "medusa:accept=typical"),
     ("hybrid:temperature=0.7", "hybrid"), ("draft:top_k=20:temperature=1.0", "draft"), ("eagle", "eagle")],
)  # fmt: skip
def test_short_label_drops_only_the_sampling_parameters(label, short):
    assert short_label(label) == short


# ---- notebook 10: the training figure is titled ------------------------------------------------------------------
def test_training_figure_is_titled():
    live = [{"step": 1, "tokens": 100, "loss": 5.0, "held_loss": 5.5}, {"step": 2, "tokens": 200, "loss": 4.0}]
    curve = {"positions": [1, 2, 3], "points": [{"tokens": 100, "loss": 6.0, "accuracy": [0.1, 0.05, 0.02]}]}
    assert training_figure(live, curve).layout.title.text
    assert training_figure(live, curve, title="live").layout.title.text == "live"
