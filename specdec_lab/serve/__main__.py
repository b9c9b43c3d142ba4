"""python -m specdec_lab.serve {export,run}: the export for vLLM, and its server on 127.0.0.1.

python -m specdec_lab.serve export --out results/serve
python -m specdec_lab.serve run --export results/serve --method auto          serves until Ctrl-C
python -m specdec_lab.serve run --export results/serve --method eagle3 --prompt "Name three primes."
                                                                               one greedy answer, then stops
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from ..io import positive_int
from .engine import METHODS, SETUP, ServeError, Server, ServerConfig, speculative_config

PROG = "python -m specdec_lab.serve"


def _batch_sizes(text: str) -> list[int]:
    sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    if not sizes or sizes[0] != 1:
        raise argparse.ArgumentTypeError(f"batch sizes must include 1 (vLLM's schedule starts there), got {text!r}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write the target, the drafters and serve.json (the policy) into --out")
    e.add_argument("--out", required=True, help="the export folder (created; parts already there are kept)")
    e.add_argument("--batch-size", type=_batch_sizes, default=[1, 2, 4, 8, 16],
                   help="batch sizes the policy prices (comma-separated, with 1)")  # fmt: skip
    e.add_argument("--keep-policy", action="store_true", help="keep an existing serve.json instead of deciding again")
    e.add_argument("--quick", action="store_true", help="a small lab (2 prompts × 16 tokens, 1 repeat): CI's smoke")
    e.add_argument("--engine-prices", default=None, metavar="FILE",
                   help="a serving bench's results (bench.serving): correct the policy by vLLM's speedups")  # fmt: skip
    r = sub.add_parser("run", help="start vLLM's OpenAI server on 127.0.0.1 for an export")
    r.add_argument("--export", required=True, help="a folder written by `export`")
    r.add_argument("--method", choices=METHODS, default="auto", help="auto: the policy's choice (serve.json)")
    r.add_argument("--num-speculative-tokens", type=positive_int, default=None, help="k (default: the policy's)")
    r.add_argument(
        "--batch-size",
        type=positive_int,
        default=None,
        help="auto: the policy's choice for this many concurrent requests (plain where nothing pays)",
    )
    r.add_argument("--port", type=int, default=None, help="default: a free port")
    r.add_argument("--threads", choices=("all", "auto"), default="all",
                   help="all: the forward on every core; auto: vLLM's own binding (one core reserved)")  # fmt: skip
    r.add_argument("--prompt", default=None, help="send this one prompt (chat template), print the answer, stop")
    r.add_argument("--max-tokens", type=positive_int, default=64)
    a = p.parse_args(argv)
    try:
        if a.command == "export":
            from .export import export_all

            record = export_all(a.out, a.batch_size, keep_policy=a.keep_policy, quick=a.quick, engine=a.engine_prices)
            chosen = {"choice": record["choice"], "speculative_config": record["speculative_config"]}
            print(json.dumps(chosen, indent=1))
            print(f"wrote {a.out}/serve.json; serve it with `{PROG} run --export {a.out}`")
            return 0
        config = ServerConfig(export=a.export, method=a.method, num_speculative_tokens=a.num_speculative_tokens,
                              port=a.port, threads=a.threads, batch_size=a.batch_size)  # fmt: skip
        spec = speculative_config(a.export, a.method, a.num_speculative_tokens, batch_size=a.batch_size)
        print("speculative config:", json.dumps(spec))
        with Server(config) as server:
            print(f"vLLM serves {a.export}/target at {server.url} (pid {server.pid}; log {server.log})", flush=True)
            if a.prompt is not None:
                from transformers import AutoTokenizer

                from ..models.load import chat_ids
                from .client import complete

                tok = AutoTokenizer.from_pretrained(f"{a.export}/target")
                answer = complete(server.url, chat_ids(tok, a.prompt), a.max_tokens)
                print(tok.decode(answer.tokens, skip_special_tokens=True))
                return 0
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a plain `kill` stops the server too
            print("Ctrl-C stops it", flush=True)
            while server.process.poll() is None:
                time.sleep(1)
            raise ServeError(f"vLLM exited on its own ({server.describe_failure()}); its log: {server.log}")
    except KeyboardInterrupt:
        return 0
    except (ServeError, FileNotFoundError, ValueError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        if isinstance(err, ServeError) and SETUP in str(err):
            print(f"  (the serving venv is set up once with `{SETUP}`)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
