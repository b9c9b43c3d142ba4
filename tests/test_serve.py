"""specdec_lab.serve: the export, the policy, the server's life cycle and the client — against a fake server
(tests/fake_vllm/server.py) everywhere but the one real smoke test (marked `vllm`), which starts vLLM itself."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from specdec_lab.serve import client, policy
from specdec_lab.serve.engine import ServeError, Server, ServerConfig, group_pids, serve_python, speculative_config

FAKE = Path(__file__).parent / "fake_vllm" / "server.py"
SCHEDULE = [[1, 1, 3], [2, 3, 2], [4, 1024, 0]]


@pytest.fixture
def export(tmp_path) -> Path:
    """An export folder with a policy: eagle3 chosen, k 3 at one request, 0 from four."""
    out = tmp_path / "export"
    for part in ("target", "draft", "eagle3"):
        (out / part).mkdir(parents=True)
        (out / part / "config.json").write_text("{}")
    record = {"drafters": {"draft": "draft", "eagle3": "eagle3"}, "ngram": {"min": 1, "max": 3},
              "choice": {"method": "eagle3"},
              "policy": {"tokens_by_method": {"ngram": 4, "draft": 1, "eagle3": 3},
                         "schedules": {"ngram": SCHEDULE, "draft": SCHEDULE, "eagle3": SCHEDULE}}}  # fmt: skip
    (out / "serve.json").write_text(json.dumps(record))
    return out


@pytest.fixture
def fake_venv(tmp_path, monkeypatch) -> Path:
    """A serving venv whose `python` runs the fake server with vLLM's command line."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    python.chmod(0o755)
    (venv / ".stamp").write_text("fake")
    monkeypatch.setenv("SPECDEC_LAB_SERVE_VENV", str(venv))
    return venv


# ---- the speculative config ---------------------------------------------------------------------------
def test_speculative_config_per_method(export):
    assert speculative_config(export, "none") is None
    eagle = speculative_config(export, "eagle3")
    assert eagle == {"method": "eagle3", "num_speculative_tokens": 3, "model": str((export / "eagle3").resolve())}
    assert speculative_config(export, "draft", 5)["method"] == "draft_model"
    assert speculative_config(export, "draft", 5)["num_speculative_tokens"] == 5
    ngram = speculative_config(export, "ngram")
    assert ngram == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}


def test_auto_is_the_policy_with_k_by_running_requests(export):
    auto = speculative_config(export, "auto")
    assert auto["method"] == "eagle3" and auto["num_speculative_tokens"] == 3
    assert auto["num_speculative_tokens_per_batch_size"] == SCHEDULE
    record = json.loads((export / "serve.json").read_text())
    record["policy"]["schedules"]["eagle3"] = [[1, 1024, 0]]  # drafts nothing anywhere: plain decoding
    (export / "serve.json").write_text(json.dumps(record))
    assert speculative_config(export, "auto") is None


def test_auto_for_a_load_serves_plain_where_no_drafter_pays(export):
    assert speculative_config(export, "auto", batch_size=2)["num_speculative_tokens_per_batch_size"] == SCHEDULE
    assert (
        speculative_config(export, "auto", batch_size=4) is None
        and speculative_config(export, "auto", batch_size=9) is None
    )
    with pytest.raises(ServeError, match="no range for batch size 0"):
        speculative_config(export, "auto", batch_size=0)


def test_bad_configs_say_what_to_do(export, tmp_path):
    with pytest.raises(ServeError, match="choose one of"):
        speculative_config(export, "medusa")
    with pytest.raises(ServeError, match="python -m specdec_lab.serve export"):
        speculative_config(tmp_path / "nothing-here", "eagle3")
    (export / "draft" / "config.json").unlink()
    with pytest.raises(ServeError, match="has no draft drafter: export it again"):
        speculative_config(export, "draft")
    with pytest.raises(ServeError, match=">= 1"):
        speculative_config(export, "eagle3", 0)


# ---- the venv and the server's life ---------------------------------------------------------------------
def test_missing_venv_names_the_make_target(tmp_path, monkeypatch, export):
    monkeypatch.setenv("SPECDEC_LAB_SERVE_VENV", str(tmp_path / "no-venv"))
    with pytest.raises(ServeError, match="make serve-setup"):
        serve_python()
    from specdec_lab.serve.__main__ import main

    assert main(["run", "--export", str(export), "--method", "none"]) == 2


def test_server_starts_answers_and_leaves_no_process(fake_venv, export):
    server = Server(ServerConfig(export=export, method="eagle3"), start_timeout=60).start()
    pid = server.pid
    try:
        assert len(group_pids(pid)) == 2  # the server and its "engine core"
        before = client.scrape_metrics(server.url)
        out = client.complete(server.url, [5, 6, 7, 8], max_tokens=4)
        assert out.tokens == [6, 7, 8, 9] and out.finish_reason == "length"
        assert len(out.itl) == 3 and out.ttft <= out.done  # chunks of 1, 2, 1 tokens: 3 gaps after the first
        spec = client.acceptance(before, client.scrape_metrics(server.url))
        assert spec["drafts"] == 2 and spec["accepted_per_position"] == [2, 1, 0]
        assert spec["rate_per_position"] == [1.0, 0.5, 0.0] and spec["mean_accepted"] == 2.5
        log = server.log.read_text()
        assert '"num_speculative_tokens": 3' in log and "--dtype float32" in log
    finally:
        server.stop()
    assert group_pids(pid) == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_busy_port_is_refused(fake_venv, export):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServeError, match=f"port {port} on 127.0.0.1 is busy"):
            Server(ServerConfig(export=export, port=port)).start()


def test_a_server_that_dies_on_start_is_reported(fake_venv, export, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM", "die")
    server = Server(ServerConfig(export=export, method="eagle3"), start_timeout=60)
    with pytest.raises(ServeError, match="exited with code 1 .*the speculative config names no draft model"):
        server.start()
    assert server.process is None


def test_the_serving_bench_loads_at_concurrency(fake_venv, export):
    from specdec_lab.bench.serving import load

    with Server(ServerConfig(export=export), start_timeout=60) as server:
        prompts = [[i, i + 1] for i in range(7)]
        done, wall = load(server.url, prompts, 3, max_tokens=8)
    assert [d.tokens for d in done] == [[i + 1, i + 2] for i in range(7)] and wall > 0


def test_metrics_parse_and_acceptance_of_a_plain_server():
    text = '# HELP x\nvllm:num_requests_running{engine="0"} 3.0\nvllm:spec_decode_num_drafts_total 4\n'
    assert client.parse_metrics(text) == {'vllm:num_requests_running{engine="0"}': 3.0,
                                          "vllm:spec_decode_num_drafts_total": 4.0}  # fmt: skip
    none = client.acceptance({}, {})
    assert none["drafts"] == 0 and none["rate_per_position"] == [] and none["mean_accepted"] is None


# ---- the policy ------------------------------------------------------------------------------------------
class _Step:
    def __init__(self, proposed, accepted):
        self.proposed, self.accepted = proposed, accepted


def test_survival_counts_every_step():
    steps = [_Step(3, 3), _Step(3, 1), _Step(0, 0), _Step(3, 2)]
    assert policy.survival(steps, 3) == [0.75, 0.5, 0.25]


def _run(method="eagle3", s=(0.8, 0.6, 0.4), drafted=1.0, cost=0.0):
    return policy.LabRun(method, len(s), list(s), drafted, cost, steps=100, tokens=200)


def test_predicted_speedup_is_the_formula():
    flat = lambda n: 1.0  # noqa: E731 - a flat curve: the step costs the same for any n
    assert policy.predicted_speedup(_run(), 3, flat) == pytest.approx(1 + 0.8 + 0.6 + 0.4)
    assert policy.predicted_speedup(_run(cost=0.1), 1, flat) == pytest.approx(1.8 / 1.1)
    half = _run(drafted=0.5)  # half the steps plain: t = 0.5 t(k+1) + 0.5 t(1)
    assert policy.predicted_speedup(half, 2, lambda n: float(n)) == pytest.approx((1 + 1.4) / (0.5 * 3 + 0.5))
    with pytest.raises(ValueError, match="k must be in 1..3"):
        policy.predicted_speedup(_run(), 4, flat)


def test_choose_and_schedule_stop_speculating_where_it_does_not_pay():
    cheap, dear = (lambda n: 1.0), (lambda n: float(n))  # weight-bound at B = 1, compute-bound at B = 16
    rows = policy.choose([_run(), _run("ngram", (0.1, 0.0, 0.0))], {1: cheap, 4: cheap, 16: dear})
    assert rows[0]["choice"] == {"method": "eagle3", "k": 3, "speedup": 2.8}
    assert rows[2]["choice"]["method"] == "none" and rows[2]["methods"]["eagle3"]["k"] == 0
    assert rows[2]["methods"]["eagle3"]["best_speedup"] < policy.MARGIN
    assert policy.schedule(rows, "eagle3") == [[1, 3, 3], [4, 15, 3], [16, 1024, 0]]
    assert policy.pick_method(rows) == ("eagle3", round((2.8 + 2.8 + 1.0) / 3, 3))
    assert policy.pick_method(policy.choose([_run(s=(0.0, 0.0, 0.0))], {1: dear})) == ("none", 1.0)
    with pytest.raises(ValueError, match="batch size 1"):
        policy.schedule(rows[1:], "eagle3")


# ---- the export ----------------------------------------------------------------------------------------
def test_export_target_names_the_architecture(tmp_path):
    from specdec_lab.models import tiny_model
    from specdec_lab.serve.export import export_target

    src = tmp_path / "src"
    tiny_model().save_pretrained(src)
    config = json.loads((src / "config.json").read_text())
    config |= {"architectures": None, "_name_or_path": "/somewhere/on/this/machine"}
    (src / "config.json").write_text(json.dumps(config))
    out = export_target(src, tmp_path / "target")
    written = json.loads((out / "config.json").read_text())
    assert written["architectures"] == ["LlamaForCausalLM"] and "_name_or_path" not in written
    assert (out / "model.safetensors").stat().st_size == (src / "model.safetensors").stat().st_size
    config["model_type"] = "gpt2"
    (src / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="only Llama targets"):
        export_target(src, tmp_path / "other")


def test_summary_rows_compare_with_vllm_plain():
    from specdec_lab.bench.serving import summarize_serving

    def run(config, c, tps, reps):
        return {"config": config, "concurrency": c, "tokens_per_s": tps, "repeat_tokens_per_s": reps,
                "ttft_median": 0.1, "ttft_p90": 0.2, "itl_median": 0.01, "itl_p90": 0.02, "identical": 7,
                "prompts": 7, "acceptance": {"rate_per_position": [0.5]}, "rows": []}  # fmt: skip

    record = {"vllm": [run("none", 1, 10.0, [10.0, 9.0]), run("eagle3", 1, 15.0, [15.0, 9.9])],
              "lab": {"eagle3": {"survival": [0.48], "drafted": 0.96}}}  # fmt: skip
    rows = summarize_serving(record)
    assert [r["config"] for r in rows] == ["none", "eagle3"]
    assert rows[1]["speedup_vs_vllm_plain"] == 1.5 and rows[1]["speedup_range"] == [1.1, 1.5]
    assert rows[1]["vllm_rate_per_position"] == [0.5] and rows[1]["ours_rate_per_position"] == [0.5]


# ---- the real thing --------------------------------------------------------------------------------------
def _serving_venv() -> str | None:
    from specdec_lab.serve.engine import serve_venv

    return None if (serve_venv() / ".stamp").is_file() else f"no serving venv at {serve_venv()}: make serve-setup"


@pytest.mark.real
@pytest.mark.vllm
def test_vllm_serves_our_eagle3_drafter_identically(real_model, tmp_path):
    """The served path end to end: export (a quick policy), vLLM with the EAGLE-3 drafter, one greedy request equal
    to our `generate`; no process left after the stop."""
    reason = _serving_venv()
    if reason:
        pytest.skip(reason)
    from specdec_lab.generate import generate
    from specdec_lab.serve.export import export_all

    record = export_all(tmp_path / "serve", batch_sizes=(1, 4), quick=True)
    assert record["policy"]["lab"]["runs"][2]["method"] == "eagle3"
    ids = real_model.chat_ids("Name three prime numbers and say why each is prime.")
    ours = generate(real_model, ids, max_new_tokens=24).tokens
    server = Server(ServerConfig(export=tmp_path / "serve", method="eagle3", num_speculative_tokens=3,
                                 max_num_seqs=4, max_model_len=512))  # fmt: skip
    with server:
        pid = server.pid
        before = client.scrape_metrics(server.url)
        got = client.complete(server.url, ids, max_tokens=24)
        spec = client.acceptance(before, client.scrape_metrics(server.url))
    assert got.tokens == ours
    assert spec["drafts"] > 0 and len(spec["accepted_per_position"]) == 3
    assert group_pids(pid) == []


def test_engine_corrections_scale_the_predictions_by_what_vllm_measured():
    cheap = {1: (lambda n: 1.0), 8: (lambda n: 1.0)}
    runs = [_run()]  # predicted at k = 3 on a flat curve: 2.8×
    measured = [("none", 1, 10.0), ("eagle3", 1, 14.0), ("none", 8, 50.0), ("eagle3", 8, 35.0)]
    serving = {"config": {"k": 3}, "vllm": [{"config": m, "concurrency": c, "tokens_per_s": t} for m, c, t in measured]}
    factors = policy.engine_corrections(runs, cheap, serving)
    assert factors == {"eagle3": {1: round(1.4 / 2.8, 4), 8: round(0.7 / 2.8, 4)}}
    rows = policy.choose(runs, cheap, corrections=factors)
    assert rows[0]["methods"]["eagle3"] == {"k": 3, "speedup": 1.4}  # 2.8 × 0.5
    assert rows[1]["methods"]["eagle3"]["k"] == 0 and rows[1]["choice"]["method"] == "none"  # 2.8 × 0.25 < margin
