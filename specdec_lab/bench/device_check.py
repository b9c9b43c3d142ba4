"""`python -m specdec_lab.bench.device_check`: what a borrowed accelerator machine should run, as one command, one file.

Such a machine has torch and transformers but no network and none of this project's wheels: the model file
(98 MB) travels in parts small enough for one transfer each, and is put back together there, checksummed:

    python -m specdec_lab.bench.device_check split --out results/device/parts        # here: parts + manifest.json
    # carry results/device/parts to the device machine (one part per transfer), then there:
    python -m specdec_lab.bench.device_check run --parts results/device/parts --out results/device/check.json

`run` goes through four stages and rewrites its JSON (atomically) after each; a rerun skips finished stages:

    1. model   join the parts into one .gguf (every part's and the whole file's sha256 checked)
    2. tests   the test suite's device-parametrized tests on the device (`pytest -k <device type>`), and the
               real-model tests on it (`SPECDEC_LAB_TEST_DEVICE`: the `real_model` fixture loads there)
    3. curve   the device's t(n) for trees and chains, in the format notebook 09's what-if reads
               (`curve_file`); also written alone beside the results (`<out>-curve.json`)
    4. bench   the bench on the device for each dtype (fp32, bf16): every method's speed, mean accepted and
               whether its greedy output equals autoregressive decoding in that precision (`identical`)

`--dry-run` does the same on this CPU with a small budget (1 prompt, 8 new tokens, a short curve): the check of
the script itself that CI runs. Where no accelerator is at hand, `run` without `--device` picks the CPU and says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ..io import atomic_path, write_json

__all__ = ["PART_BYTES", "split_file", "join_parts", "sha256", "run_check", "main"]

PART_BYTES = 60 * 2**20  # under the 64 MiB one transfer carries, with room for the manifest
MANIFEST = "manifest.json"
EXACT_METHODS = "autoregressive,prompt_lookup,draft,layer_skip,medusa,lookahead,jacobi"


class PartsError(ValueError):
    """The parts do not make the file their manifest describes (missing, truncated or corrupted)."""


def sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def split_file(path: str | os.PathLike, out: str | os.PathLike, part_bytes: int = PART_BYTES) -> dict:
    """Cut `path` into `out/part-000`, `part-001`, ... of at most `part_bytes` each, plus `out/manifest.json`
    (name, size, sha256 of the whole file and of every part); returns the manifest."""
    path, out = Path(path), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parts = []
    with open(path, "rb") as f:
        for i, block in enumerate(iter(lambda: f.read(part_bytes), b"")):
            name = f"part-{i:03d}"
            with atomic_path(out / name) as tmp:
                Path(tmp).write_bytes(block)
            parts.append({"file": name, "bytes": len(block), "sha256": hashlib.sha256(block).hexdigest()})
    manifest = {"name": path.name, "bytes": path.stat().st_size, "sha256": sha256(path), "parts": parts}
    write_json(out / MANIFEST, manifest)
    return manifest


def join_parts(parts: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Reassemble the file `split_file` cut into `parts` under `out_dir/<name>`, checking every checksum; a file
    already there with the right checksum is kept. Raises `PartsError` naming the first part that is wrong."""
    parts = Path(parts)
    if not (parts / MANIFEST).is_file():
        raise PartsError(
            f"{parts} has no {MANIFEST}: make the parts with `python -m specdec_lab.bench.device_check split`"
        )
    manifest = json.loads((parts / MANIFEST).read_text())
    target = Path(out_dir) / manifest["name"]
    if target.is_file() and target.stat().st_size == manifest["bytes"] and sha256(target) == manifest["sha256"]:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp, open(tmp, "wb") as f:
        for p in manifest["parts"]:
            block = (parts / p["file"]).read_bytes() if (parts / p["file"]).is_file() else None
            if block is None:
                raise PartsError(f"part {p['file']} of {manifest['name']} is missing from {parts}")
            if len(block) != p["bytes"] or hashlib.sha256(block).hexdigest() != p["sha256"]:
                raise PartsError(f"part {p['file']} of {manifest['name']} is corrupted or truncated "
                                 f"({len(block)} bytes, expected {p['bytes']}): copy it again")  # fmt: skip
            f.write(block)
    if sha256(target) != manifest["sha256"]:  # every part was right, so only a failed write gets here
        target.unlink()
        raise PartsError(f"the joined {manifest['name']} does not match its checksum")
    return target


def _pytest(args: list[str], env: dict) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, env={**os.environ, **env})  # fmt: skip
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    # exit code 5: no test was selected (e.g. nothing is parametrized for this device)
    return {"args": args, "returncode": proc.returncode, "passed": proc.returncode in (0, 5),
            "seconds": round(time.perf_counter() - t0, 1), "tail": tail}  # fmt: skip


def _bench(model: str, device: str, dtype: str, methods: str, limit: int, tokens: int, out: Path) -> dict:
    from .__main__ import main as bench_main

    argv = ["--model", model, "--device", device, "--dtype", dtype, "--methods", methods, "--limit", str(limit),
            "--max-new-tokens", str(tokens), "--out", str(out), "--no-progress", "--no-traces"]  # fmt: skip
    code = bench_main(argv)
    if code != 0:
        return {"argv": argv, "returncode": code}
    summary = json.loads(out.read_text())["summary"]
    keep = ("tokens_per_s", "speedup", "speedup_95", "mean_accepted", "identical_to_autoregressive")
    return {"argv": argv, "returncode": 0, "methods": {m: {k: s.get(k) for k in keep} for m, s in summary.items()}}


def run_check(model: str, out: str | os.PathLike, device: str | None = None, dry_run: bool = False,
              methods: str = EXACT_METHODS, dtypes: tuple[str, ...] = ("float32", "bfloat16"),
              limit: int = 16, max_new_tokens: int = 64) -> dict:  # fmt: skip
    """The four stages (module docstring) for a model already on disk; returns the results written to `out`."""
    import torch

    from ..cost.curve_file import measure_curve_file
    from ..machine import machine_info

    out = Path(out)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dry_run:
        device, dtypes, limit, max_new_tokens = "cpu", ("float32",), 1, 8
    results = json.loads(out.read_text()) if out.is_file() else {}
    if results.get("config", {}).get("device") not in (None, device):
        raise ValueError(f"{out} holds results for device {results['config']['device']}, not {device}: pass "
                         "another --out")  # fmt: skip
    results["config"] = {"model": model, "device": device, "dry_run": dry_run, "methods": methods,
                         "dtypes": list(dtypes), "limit": limit, "max_new_tokens": max_new_tokens}  # fmt: skip
    results.setdefault("machine", machine_info(device))
    write_json(out, results)
    stages = results.setdefault("stages", {})

    def stage(name: str, fn) -> None:
        if name in stages:
            print(f"device_check: {name} done before, skipped", file=sys.stderr)
            return
        t0 = time.perf_counter()
        print(f"device_check: {name} ...", file=sys.stderr)
        stages[name] = {**fn(), "stage_seconds": round(time.perf_counter() - t0, 1)}
        write_json(out, results)

    kind = torch.device(device).type
    if not dry_run:  # the dry run checks the script, not the suite (CI runs the suite itself)
        stage("tests_device", lambda: _pytest(["tests", "-k", kind, "-m", "not real and not browser"], {}))
        stage("tests_real", lambda: _pytest(["tests", "-m", "real", "-x"], {"SPECDEC_LAB_TEST_DEVICE": device}))

    def curve() -> dict:
        record = measure_curve_file(model, device, "float32", repeats=3 if dry_run else 7,
                                    max_tokens=4 if dry_run else 64)  # fmt: skip
        write_json(out.with_name(out.stem + "-curve.json"), record)
        return {"file": out.stem + "-curve.json", "points": record["points"]}

    stage("curve", curve)
    for dtype in dtypes:
        bench_out = out.with_name(f"{out.stem}-bench-{dtype}.json")
        stage(f"bench_{dtype}", lambda d=dtype, b=bench_out: _bench(model, device, d, methods, limit,
                                                                    max_new_tokens, b))  # fmt: skip
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.device_check", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("split", help="cut the model file into parts (here, before carrying them)")
    s.add_argument("--model", default="smollm2-135m", help="shipped model name or a file")
    s.add_argument("--out", default="results/device/parts")
    s.add_argument("--part-mib", type=int, default=PART_BYTES >> 20)
    r = sub.add_parser("run", help="join the parts and run the checks (on the device machine)")
    r.add_argument("--parts", default=None, help="folder of parts from `split` (else --model is used as is)")
    r.add_argument("--model", default="smollm2-135m", help="shipped model name, .gguf or HF folder")
    r.add_argument("--out", default="results/device/check.json")
    r.add_argument("--device", default=None, help="cuda, cuda:1, ... (default: cuda if available, else cpu)")
    r.add_argument("--methods", default=EXACT_METHODS)
    r.add_argument("--limit", type=int, default=16, help="bench prompts")
    r.add_argument("--max-new-tokens", type=int, default=64)
    r.add_argument("--dry-run", action="store_true", help="on this CPU with a tiny budget: checks the script")
    a = p.parse_args(argv)
    try:
        if a.command == "split":
            from ..models.load import find_model_file

            path = find_model_file(a.model) or Path(a.model)
            if not path.is_file():
                raise FileNotFoundError(f"no model file {a.model!r}: a shipped name (its wheel installed) or a file")
            m = split_file(path, a.out, a.part_mib << 20)
            print(f"wrote {len(m['parts'])} parts of {m['name']} ({m['bytes']} bytes) and {MANIFEST} to {a.out}")
            return 0
        model = str(join_parts(a.parts, Path(a.parts) / "joined")) if a.parts else a.model
        res = run_check(model, a.out, a.device, a.dry_run, a.methods, limit=a.limit, max_new_tokens=a.max_new_tokens)
    except (PartsError, ValueError, FileNotFoundError) as err:
        print(f"specdec_lab.bench.device_check: error: {err}", file=sys.stderr)
        return 2
    failed = [k for k, v in res["stages"].items() if v.get("passed") is False or v.get("returncode", 0) not in (0, 5)]
    print(f"wrote {a.out} ({res['config']['device']}); stages: {', '.join(res['stages'])}"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
