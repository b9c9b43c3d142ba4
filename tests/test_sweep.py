"""The sweep runner (specdec_lab.sweep) on a tiny model-free notebook, executed by the real papermill.

The notebook (written into tmp_path) takes x, y, a few control parameters and result_path; it appends a
line to `counter_path` each time it runs (how resume is checked: finished points never run twice) and its
kernel's pid to `counter_path.pids` (how a test checks that a stopped point's kernel is gone), raises when
x == fail_on, writes no result when y == "none", and waits while `pause_file` exists (so a test can
interrupt it mid-point). Its result: speedup = x * (2 if y == "b" else 1).

The cluster tests start a Dask LocalCluster on the loopback address; they skip without `distributed` (the
optional `cluster` extra) except under CI=true, where .ci/run installs it and its absence fails them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from specdec_lab.sweep import (
    RunConfig,
    SpecError,
    check_methods,
    expand,
    gather,
    load_spec,
    point_dir,
    run_sweep,
    short_labels,
    sweep_figure,
)
from specdec_lab.sweep.__main__ import main

REPO = Path(__file__).resolve().parents[1]

PARAMETERS = """\
x: int = 1  # an axis
y: str = "a"  # an axis
method: str = "autoregressive"  # unused here; lets specs pass a method
fail_on: int = -1  # raise when x equals this
counter_path: str = ""  # one line appended per execution
pause_file: str = ""  # wait while this file exists
result_path: str = ""  # where the result JSON goes
"""

BODY = """\
import json, os, time
if counter_path:
    with open(counter_path, "a") as f:
        f.write(f"{x},{y}\\n")
    with open(counter_path + ".pids", "a") as f:
        f.write(f"{os.getpid()} {os.environ.get('SWEEP_TEST_WORKER', 'local')}\\n")
if os.environ.get("SPECDEC_LAB_FIGURES"):  # where save_figure would write: the point's own folder
    os.makedirs(os.environ["SPECDEC_LAB_FIGURES"], exist_ok=True)
    open(os.path.join(os.environ["SPECDEC_LAB_FIGURES"], "marker.txt"), "w").close()
while pause_file and os.path.exists(pause_file):
    time.sleep(0.05)
if x == fail_on:
    raise ValueError(f"point x={x} fails on purpose")
"""

WRITE = """\
if y != "none" and result_path:  # plain json, not specdec_lab.io: importing specdec_lab imports torch (seconds)
    result = {"x": x, "y": y, "speedup": x * (2 if y == "b" else 1), "label": f"{x}{y}", "machine": {"cpu": "test"}}
    with open(result_path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(result_path + ".tmp", result_path)
"""


@pytest.fixture(scope="session")
def notebook(tmp_path_factory) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell(PARAMETERS)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(BODY), nbformat.v4.new_code_cell(WRITE)]
    path = tmp_path_factory.mktemp("nb") / "sweep_point.ipynb"
    nbformat.write(nb, path)
    return path


def write_spec(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def base_spec(tmp_path: Path, notebook: Path, extra: str = "", grid: str = "grid: {x: [1, 2, 3], y: [a]}") -> Path:
    return write_spec(
        tmp_path / "spec.yaml",
        f"name: tiny\nnotebook: {notebook}\n"
        f"parameters: {{fail_on: 2, counter_path: {tmp_path / 'counter.txt'}}}\n{grid}\n{extra}",
    )


def runs(tmp_path: Path) -> list[str]:
    counter = tmp_path / "counter.txt"
    return counter.read_text().split() if counter.exists() else []


def kernels(tmp_path: Path) -> list[tuple[int, str]]:
    """(pid, where) of every kernel that ran a point: where = the SWEEP_TEST_WORKER it saw, or 'local'."""
    pids = tmp_path / "counter.txt.pids"
    lines = pids.read_text().splitlines() if pids.exists() else []
    return [(int(pid), where) for pid, where in (line.split() for line in lines)]


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (one killed whose new parent has not reaped it yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        if Path("/proc").is_dir():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def leftovers(out: Path) -> list[str]:
    """Files under `out` besides the notebook's figures marker: after an interrupt there must be none."""
    return [f.name for f in out.rglob("*") if f.is_file() and "figures" not in f.parts]


# ---- the spec ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, needle",
    [
        ("grid: {x: [1]}\ngird: {}", "unknown key 'gird'"),
        ("grid: {}", "the grid is empty"),
        ("grid: {x: []}", "grid.x: empty list"),
        ("grid: {x: [1, 1]}", "value 1 listed twice"),
        ("grid: {x: [1]}\nparameters: {x: 2}", "'x' is both a fixed parameter and a grid axis"),
        ("grid: {x: [1]}\nparameters: {z: 2}", "'z' is not a parameter of sweep_point.ipynb"),
        ("grid: {x: [1]}\nparameters: {result_path: a}", "'result_path' is set by the runner"),
        ("grid: {x: [1]}\ntemplates: {method: 'm:{w}'}", "uses {w}, which is not a grid axis"),
        ("grid: {x: [1]}\nquick: {grid: {w: [1]}}", "quick.grid.w: not an axis of grid"),
        ("grid: {x: [1]}\nquick: {grdi: {}}", "quick: unknown key 'grdi'"),
        ("grid: {x: [{a: 1}]}", "grid.x: {'a': 1} is a dict"),
    ],
)
def test_spec_errors_name_the_problem(tmp_path, notebook, text, needle):
    spec = write_spec(tmp_path / "bad.yaml", f"name: t\nnotebook: {notebook}\n{text}\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert needle in str(err.value) and "bad.yaml" in str(err.value)


def test_missing_notebook_and_keys(tmp_path):
    with pytest.raises(SpecError, match="notebook 'nope.ipynb' does not exist"):
        load_spec(write_spec(tmp_path / "a.yaml", "name: t\nnotebook: nope.ipynb\ngrid: {x: [1]}\n"))
    with pytest.raises(SpecError, match="missing key 'grid'"):
        load_spec(write_spec(tmp_path / "b.yaml", "name: t\nnotebook: nope.ipynb\n"))
    with pytest.raises(SpecError, match="not found"):
        load_spec(tmp_path / "absent.yaml")


def test_grid_expansion_ids_and_templates(tmp_path, notebook):
    spec = load_spec(
        write_spec(
            tmp_path / "s.yaml",
            f"name: t\nnotebook: {notebook}\nparameters: {{fail_on: 9}}\n"
            "grid: {x: [1, 2], y: [a, b, c]}\ntemplates: {method: 'lookahead:W={x}:G=2'}\n"
            "quick: {grid: {y: [b]}, parameters: {fail_on: 8}}\n",
        )
    )
    points = expand(spec)
    assert [p.values for p in points][:4] == [{"x": 1, "y": y} for y in "abc"] + [{"x": 2, "y": "a"}]
    assert points[0].parameters == {"fail_on": 9, "y": "a", "method": "lookahead:W=1:G=2"}  # x consumed by the template
    assert points[0].id.startswith("x-1.y-a-") and len({p.id for p in points}) == 6
    assert [p.id for p in expand(load_spec(spec.source))] == [p.id for p in points]  # stable across loads
    quick = spec.quick_spec()
    assert quick.grid == {"x": [1, 2], "y": ["b"]} and quick.parameters["fail_on"] == 8
    assert {p.id for p in expand(quick)}.isdisjoint(p.id for p in points)  # other parameters, other points
    assert spec.varying == ["x", "y"] and quick.varying == ["x"]


def test_method_strings_are_checked(tmp_path, notebook):
    text = f"name: t\nnotebook: {notebook}\ngrid: {{method: ['draft:draft_length=2', 'draft:draft_lenght=2']}}\n"
    spec = load_spec(write_spec(tmp_path / "m.yaml", text))
    with pytest.raises(SpecError, match="draft_lenght"):
        check_methods(spec, expand(spec))


def test_short_labels():
    assert short_labels(["draft:draft_length=1", "draft:draft_length=cost"]) == (["1", "cost"], "draft:draft_length=…")
    assert short_labels(["medusa:tree=chain:1", "medusa:max_budget=4"])[0] == ["tree=chain:1", "max_budget=4"]
    assert short_labels([1, 2]) == (["1", "2"], "")


# ---- running ----------------------------------------------------------------------------------------
def test_run_one_failing_point_then_resume(tmp_path, notebook, monkeypatch):
    spec = load_spec(base_spec(tmp_path, notebook))
    monkeypatch.chdir(tmp_path)
    points, out = expand(spec), Path("out")  # relative: the kernel runs elsewhere (the notebook's folder)
    # "interrupted" earlier: only the first point ran
    s = run_sweep(spec, points[:1], RunConfig(out=out, progress=False))
    assert (s.ran, s.failed) == (1, 0) and runs(tmp_path) == ["1,a"]
    first = point_dir(out, points[0]) / "result.json"
    mtime = first.stat().st_mtime_ns

    s = run_sweep(spec, points, RunConfig(out=out, progress=False))
    assert (s.ran, s.failed, s.skipped) == (1, 1, 1)
    assert runs(tmp_path) == ["1,a", "2,a", "3,a"]  # the finished point was not executed again
    assert first.stat().st_mtime_ns == mtime
    failed = point_dir(out, points[1])
    err = json.loads((failed / "error.json").read_text())
    assert err["error"] == "ValueError" and "fails on purpose" in err["message"]
    assert "raise ValueError" in err["source"] and err["parameters"]["x"] == 2
    assert not (failed / "result.json").exists() and (failed / "notebook.ipynb").exists()  # kept for debugging
    for p in (points[0], points[2]):
        assert json.loads((point_dir(out, p) / "result.json").read_text())["speedup"] == p.values["x"]
        executed = nbformat.read(point_dir(out, p) / "notebook.ipynb", as_version=4)
        assert executed.metadata.papermill.parameters["x"] == p.values["x"]
        assert (point_dir(out, p) / "figures" / "marker.txt").is_file()  # its figures went to its own folder
    assert not [f for f in out.rglob(".*") if f.is_file()]  # no temp or pending files left

    # a failed point is kept as failed ...
    s = run_sweep(spec, points, RunConfig(out=out, progress=False))
    assert (s.ran, s.failed, s.skipped, s.kept_failed) == (0, 0, 2, 1) and len(runs(tmp_path)) == 3
    # ... until --retry-failed (still failing here)
    s = run_sweep(spec, points, RunConfig(out=out, progress=False, retry_failed=True))
    assert (s.ran, s.failed) == (0, 1) and runs(tmp_path)[-1] == "2,a"

    table = gather(spec, points, out)
    assert [r["status"] for r in table["rows"]] == ["done", "failed", "done"]
    assert table["counts"] == {"done": 2, "failed": 1, "pending": 0}
    assert table["best"]["id"] == points[2].id and table["best"]["value"] == 3
    assert table["best"]["result"]["machine"] == {"cpu": "test"}  # nested values kept in best
    assert table["rows"][1]["error"].startswith("ValueError: point x=2 fails on purpose")
    assert "machine" not in table["columns"]
    assert {"x", "y", "speedup", "label", "status", "seconds"} <= set(table["columns"])
    assert json.loads((out / "table.json").read_text())["best"]["id"] == points[2].id
    csv_lines = (out / "table.csv").read_text().splitlines()
    assert csv_lines[0].split(",")[:3] == ["id", "status", "x"] and len(csv_lines) == 4
    assert csv_lines[2].startswith(f"{points[1].id},failed,2,a,2,")
    assert (out / "tiny_speedup.html").is_file() and (out / "plotly.min.js").is_file()
    assert table["figure"]["html"] == "tiny_speedup.html"


def test_no_result_is_a_failure_and_cli(tmp_path, notebook, capsys):
    spec = base_spec(tmp_path, notebook, grid="grid: {x: [1, 4], y: [b, none]}")
    rc = main([str(spec), "--out", str(tmp_path / "out"), "--no-progress", "--workers", "2"])
    out = capsys.readouterr().out
    assert rc == 1  # some point failed
    assert "best speedup = 8 at x=4, y=b" in out and "2 failed" in out
    table = json.loads((tmp_path / "out" / "table.json").read_text())
    status = {(r["x"], r["y"]): r["status"] for r in table["rows"]}
    assert status == {(1, "b"): "done", (1, "none"): "failed", (4, "b"): "done", (4, "none"): "failed"}
    errors = [json.loads(f.read_text())["error"] for f in sorted((tmp_path / "out").rglob("error.json"))]
    assert errors == ["NoResult", "NoResult"]


STOP_WITHIN = 20  # seconds one Ctrl-C may take to stop a sweep (it takes a few: process.py kills, not asks)


def paused_sweep(tmp_path, notebook, args=(), running=1):
    """A quick sweep started in its own process group, its first `running` points running and paused on a
    file -> (proc, cmd, out folder, pause file)."""
    pause = tmp_path / "pause"
    pause.touch()
    spec = base_spec(tmp_path, notebook, extra=f"quick: {{parameters: {{pause_file: {pause}}}}}")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "specdec_lab.sweep", str(spec), "--quick", "--out", str(out), "--no-progress", *args]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while len(kernels(tmp_path)) < running and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    if len(runs(tmp_path)) != running:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"{running} point(s) should be running; ran {runs(tmp_path)}: " + proc.communicate()[0].decode())
    time.sleep(0.5)
    return proc, cmd, out, pause


def stop_or_fail(proc, what: str) -> str:
    """Wait up to STOP_WITHIN s for the sweep to exit -> its log; else dump its stacks (SIGUSR1), kill it, fail."""
    try:
        return proc.communicate(timeout=STOP_WITHIN)[0].decode()
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"{what} did not stop the sweep in {STOP_WITHIN} s: " + proc.communicate()[0].decode()[-6000:])


@pytest.mark.parametrize("workers", [1, 2])
def test_one_interrupt_stops_the_sweep(tmp_path, notebook, workers):
    """ONE Ctrl-C — SIGINT to the runner's process group, as a terminal sends it — while every core is busy:
    the sweep exits 130 with the resume hint within STOP_WITHIN s, the running points' kernels are gone, no
    temp notebook or pending result is left, and the next run redoes the interrupted points, once each."""
    proc, cmd, out, pause = paused_sweep(tmp_path, notebook, args=("--workers", str(workers)), running=workers)
    # load: the 2-core machine fully busy, as under the whole suite (where one SIGINT used to go unheard)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        log = stop_or_fail(proc, "one SIGINT")
        took = time.monotonic() - t0
        print(f"one SIGINT stopped the sweep ({workers} worker(s), under load) in {took:.1f} s")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert proc.returncode == 130, log
    assert "rerun the same command to resume" in log and took < STOP_WITHIN
    assert [pid for pid, _ in kernels(tmp_path) if alive(pid)] == []  # killed before the runner exited
    assert leftovers(out) == []  # no temp notebook, no pending result, no half table
    pause.unlink()
    time.sleep(1)
    assert leftovers(out) == []  # and nothing came late: no kernel was left to leave its pause loop
    rc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert rc.returncode == 1, rc.stdout + rc.stderr  # point 2 fails on purpose
    interrupted = runs(tmp_path)[:workers]
    assert sorted(runs(tmp_path)) == sorted([*interrupted, "1,a", "2,a", "3,a"])  # each interrupted point ran again


def test_a_second_interrupt_stops_at_once(tmp_path, notebook):
    """Two Ctrl-C in quick succession, to the runner alone: the second lands while the first is stopping the
    point and quits at once (`_second_interrupt_quits`). Either way: exit 130, the resume hint, the kernel
    gone and no temp notebook or pending result left behind."""
    proc, _, out, pause = paused_sweep(tmp_path, notebook)
    os.kill(proc.pid, signal.SIGINT)
    time.sleep(0.05)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGINT)
    try:
        log = stop_or_fail(proc, "two SIGINTs")
    finally:
        pause.unlink(missing_ok=True)  # a kernel left alive (a bug) leaves its pause loop, and shows below
    assert proc.returncode == 130, log
    assert "rerun the same command to resume" in log
    assert [pid for pid, _ in kernels(tmp_path) if alive(pid)] == []
    assert leftovers(out) == []


def test_remove_partial_keeps_finished_files(tmp_path):
    from specdec_lab.sweep import remove_partial

    point = tmp_path / "points" / "1,a"
    (point / "figures").mkdir(parents=True)
    for name in ("result.json", "notebook.ipynb", ".notebook.ipynb.x1.tmp", ".result.abc.pending.json"):
        (point / name).write_text("{}")
    (point / "figures" / ".f.png.x2.tmp").write_text("")
    (tmp_path / ".table.csv.x3.tmp").write_text("")
    remove_partial(tmp_path)
    assert sorted(str(f.relative_to(tmp_path)) for f in tmp_path.rglob("*") if f.is_file()) == [
        "points/1,a/notebook.ipynb",
        "points/1,a/result.json",
    ]


def test_a_kernel_side_interrupt_stops_the_sweep(tmp_path):
    """Ctrl-C that ends the kernel's cell (KeyboardInterrupt inside the notebook) is the user's interrupt,
    also when the runner itself missed the signal: `run_point` raises KeyboardInterrupt, records no failed
    point and leaves no pending result or temp notebook (else the sweep went on to the next point)."""
    from specdec_lab.sweep import run_point

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('result_path = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("raise KeyboardInterrupt")]
    path = tmp_path / "interrupted.ipynb"
    nbformat.write(nb, path)
    folder = tmp_path / "point"
    with pytest.raises(KeyboardInterrupt):
        run_point(path, folder, {})
    assert [f.name for f in folder.rglob("*") if f.is_file()] == []


def test_figure_facets_and_mixed_axis(tmp_path, notebook):
    spec = load_spec(
        write_spec(
            tmp_path / "f.yaml",
            f"name: f\nnotebook: {notebook}\ngrid: {{method: ['d:k=1', 'd:k=cost'], x: [1, 2], y: [a, b]}}\n",
        )
    )
    rows = [{"id": p.id, "status": "done", **p.values, "speedup": 1.0 + 0.1 * i} for i, p in enumerate(expand(spec))]
    rows[0]["status"] = "failed"
    fig = sweep_figure(spec, rows)
    assert len(fig.data) == 4  # 2 lines (x) x 2 facets (y)
    assert list(fig.layout.xaxis.categoryarray) == ["1", "cost"]
    assert "method (d:k=…)" in fig.layout.xaxis.title.text or "method (d:k=…)" in fig.layout.xaxis2.title.text
    assert sum(len(t.x) for t in fig.data) == 7  # the failed point is left out
    assert sweep_figure(spec, [{**r, "status": "failed"} for r in rows]) is None


def test_png_failure_warns_not_crashes(tmp_path, notebook, monkeypatch):
    import specdec_lab.viz.figures as figures

    def broken(*args, **kwargs):
        raise RuntimeError("no chromium here")

    monkeypatch.setattr(figures, "_write_png", broken)
    spec = load_spec(base_spec(tmp_path, notebook, grid="grid: {x: [1], y: [a, b]}"))
    points = expand(spec)
    out = tmp_path / "out"
    for p in points:  # results as a finished run leaves them, without running anything
        (point_dir(out, p)).mkdir(parents=True)
        (point_dir(out, p) / "result.json").write_text(json.dumps({"speedup": 1.5}))
    with pytest.warns(RuntimeWarning, match="static PNG export"):
        table = gather(spec, points, out)
    assert table["figure"] == {"html": "tiny_speedup.html", "png": None}


# ---- on a Dask cluster -----------------------------------------------------------------------------
def require_distributed():
    """`distributed`, or skip — except under CI=true, where .ci/run installs the `cluster` extra: fail there."""
    if os.environ.get("CI") == "true":
        try:
            import distributed
        except ImportError:
            pytest.fail("CI=true but `distributed` is not installed: .ci/run's cluster-extra stage must install it "
                        "(pip install -e '.[cluster]')")  # fmt: skip
        return distributed
    return pytest.importorskip("distributed", reason="the optional `cluster` extra: pip install -e '.[cluster]'")


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes on 127.0.0.1, closed however the tests end. Their env marks the
    kernels they start (SWEEP_TEST_WORKER), so a test can tell a point ran on the cluster."""
    import logging

    distributed = require_distributed()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(REPO))  # the workers import this checkout's specdec_lab, not an installed one
        c = distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
            silence_logs=logging.CRITICAL, env={"SWEEP_TEST_WORKER": "dask"},
        )  # fmt: skip
    try:
        yield c
    finally:
        c.close()


def test_cluster_runs_resumes_and_matches_local(tmp_path, notebook, cluster, capsys):
    """The same sweep locally and through --cluster: every point done on a Dask worker, a rerun runs nothing,
    and the two tables are the same (bar the seconds each point took)."""
    spec = base_spec(tmp_path, notebook, grid="grid: {x: [1, 3, 4], y: [a]}")  # fail_on: 2, not in the grid
    local, remote = tmp_path / "local", tmp_path / "cluster"
    assert main([str(spec), "--out", str(local), "--no-progress"]) == 0
    assert {where for _, where in kernels(tmp_path)} == {"local"}
    address = ["--cluster", cluster.scheduler_address]
    assert main([str(spec), "--out", str(remote), "--no-progress", *address]) == 0, capsys.readouterr()
    assert [where for _, where in kernels(tmp_path)].count("dask") == 3  # each point once, on the workers
    for p in expand(load_spec(spec)):
        assert json.loads((point_dir(remote, p) / "result.json").read_text())["speedup"] == p.values["x"]
    assert not [f for f in remote.rglob(".*") if f.is_file()]  # no temp or pending files left
    capsys.readouterr()
    before = runs(tmp_path)
    assert main([str(spec), "--out", str(remote), "--no-progress", *address]) == 0
    assert "ran 0 points" in capsys.readouterr().out and runs(tmp_path) == before  # resume: nothing ran

    def rows(folder):
        return [
            {k: v for k, v in r.items() if k != "seconds"}
            for r in json.loads((folder / "table.json").read_text())["rows"]
        ]

    assert rows(remote) == rows(local) and len(rows(local)) == 3


def test_one_interrupt_stops_a_cluster_sweep(tmp_path, notebook, cluster):
    """Ctrl-C with --cluster: the points running on the workers are told to stop, kill their papermill and
    kernel and remove their partial files; the sweep exits 130 with the resume hint; the next run resumes."""
    args = ("--cluster", cluster.scheduler_address)
    proc, cmd, out, pause = paused_sweep(tmp_path, notebook, args=args, running=2)
    assert {where for _, where in kernels(tmp_path)} == {"dask"}
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    log = stop_or_fail(proc, "one SIGINT (cluster)")
    print(f"one SIGINT stopped the cluster sweep in {time.monotonic() - t0:.1f} s")
    assert proc.returncode == 130, log
    assert "rerun the same command to resume" in log
    assert [pid for pid, _ in kernels(tmp_path) if alive(pid)] == []
    assert leftovers(out) == []
    pause.unlink()
    rc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert rc.returncode == 1, rc.stdout + rc.stderr  # point 2 fails on purpose
    assert len(runs(tmp_path)) == 2 + 3  # the two interrupted points ran again, the third once


def test_cluster_without_distributed_is_a_clear_error(tmp_path, notebook):
    """Importing specdec_lab.sweep never needs `distributed`; --cluster without it says how to install it."""
    spec = base_spec(tmp_path, notebook)
    code = (
        "import sys; sys.modules['distributed'] = None  # as if not installed\n"
        "from specdec_lab.sweep.__main__ import main\n"
        f"sys.exit(main([{str(spec)!r}, '--out', {str(tmp_path / 'out')!r}, '--cluster', 'tcp://127.0.0.1:9']))"
    )
    rc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert rc.returncode == 2, rc.stdout + rc.stderr
    assert "pip install -e '.[cluster]'" in rc.stderr and "Traceback" not in rc.stderr
    assert runs(tmp_path) == []


# ---- the shipped specs ------------------------------------------------------------------------------
SHIPPED = sorted((REPO / "data" / "sweeps").glob("*.yaml"))


def test_shipped_specs_exist():
    """The specs notebooks/README.md lists and `make sweep-check` runs are shipped (an empty glob would run no test
    below)."""
    names = {p.name for p in SHIPPED}
    expected = {
        "draft_length_temperature.yaml",
        "medusa_budget.yaml",
        "lookahead_wng.yaml",
        "prompt_lookup_priors.yaml",
    }
    assert expected <= names, f"missing in data/sweeps/: {sorted(expected - names)}"


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_specs_are_valid(path):
    notebook = REPO / "notebooks" / "08_speedup_lab.ipynb"
    assert notebook.is_file(), f"{notebook.relative_to(REPO)} is missing: the shipped sweep specs run it"
    spec = load_spec(path)
    points = expand(spec)
    check_methods(spec, points)
    quick = expand(spec.quick_spec())
    check_methods(spec, quick)
    assert 2 <= len(quick) <= 3 and len(points) > len(quick)
    assert len({p.id for p in points}) == len(points)


def test_a_kernel_that_dies_at_start_is_started_again(tmp_path, monkeypatch):
    """papermill_child: a kernel that died before answering kernel_info ran none of the point's code, so the
    point is executed again (up to START_ATTEMPTS) instead of being recorded as failed; other errors are not."""
    import papermill

    from specdec_lab.sweep import papermill_child

    def run(failures: list[Exception]) -> tuple[dict, int]:
        calls = []

        def execute_notebook(*args, **kwargs):
            calls.append(1)
            if failures:
                raise failures.pop(0)

        monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
        job = {"parent": os.getppid(), "notebook": "in.ipynb", "output": str(tmp_path / "out.ipynb"),
               "parameters": {}, "kernel": "python3", "cwd": str(tmp_path), "cell_timeout": None,
               "report": str(tmp_path / "report.json")}  # fmt: skip
        (tmp_path / "job.json").write_text(json.dumps(job))
        assert papermill_child.main(str(tmp_path / "job.json")) == 0
        return json.loads((tmp_path / "report.json").read_text()), len(calls)

    died = RuntimeError("Kernel died before replying to kernel_info")
    assert run([died, died]) == ({"error": None}, 3)
    report, calls = run([RuntimeError("Kernel died before replying to kernel_info")] * 3)
    assert calls == papermill_child.START_ATTEMPTS and report["error"]["ename"] == "RuntimeError"
    report, calls = run([ValueError("a failing cell")])
    assert calls == 1 and report["error"] == {"ename": "ValueError", "evalue": "a failing cell"}


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="the kernel is found through /proc (Linux)")
def test_a_second_interrupt_inside_the_first_kill_still_kills_the_kernel(tmp_path):
    """The race behind a kernel left alive: Ctrl-C twice, the second landing inside the first one's kill, after
    the point's child died (and was reaped) but before the kernel's group was killed. The family read when
    that kill began is kept, so `kill_all` still kills the kernel (a grandchild in a session of its own)."""
    from specdec_lab.sweep import process

    pid_file = tmp_path / "kernel.pid"
    code = (
        "import subprocess, sys, time\n"
        "k = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(k.pid))\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    deadline = time.monotonic() + 30
    while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    kernel = int(pid_file.read_text())
    process._LIVE[child.pid] = child
    try:
        assert process._record_family(child)[1:] == [kernel]  # the first kill began: family read ...
        os.killpg(child.pid, signal.SIGKILL)  # ... the child killed and reaped, the kernel not yet
        child.wait(timeout=10)
        assert alive(kernel)
        process.kill_all()  # the second Ctrl-C
        assert not alive(kernel)
    finally:
        process._LIVE.pop(child.pid, None)
        process._FAMILY.pop(child.pid, None)
        if alive(kernel):
            os.kill(kernel, signal.SIGKILL)
