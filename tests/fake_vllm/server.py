"""A stand-in for vLLM's OpenAI server in tests of `specdec_lab.serve` (no vLLM needed).

Run as `python server.py -m vllm.entrypoints.openai.api_server ... --port N` (the fake venv's `python` wrapper passes
vLLM's command line through). Behaviour by the FAKE_VLLM environment variable:
    ok      /health 200; /v1/completions streams the prompt's ids back, +1 each, in chunks of 1, 2, 1, ...;
            /metrics: speculation counters that grow by 2 drafts a request; forks a child process (`sleep`) as
            vLLM forks its engine core, so a stop must end the whole group
    die     prints a line like vLLM's on a bad config and exits 1 before listening
"""

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REQUESTS = [0]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/health":
            body = b""
        elif self.path == "/metrics":
            n = REQUESTS[0]
            body = (
                "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
                f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="target"}} {2.0 * n}\n'
                f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="target"}} {6.0 * n}\n'
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="0"}} {2.0 * n}\n'
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="1"}} {1.0 * n}\n'
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="2"}} {0.0 * n}\n'
            ).encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        REQUESTS[0] += 1
        new = [t + 1 for t in body["prompt"]][: body["max_tokens"]]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        i, size = 0, 1
        while i < len(new):
            chunk = {"choices": [{"index": 0, "text": "", "token_ids": new[i : i + size], "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            i, size = i + size, 3 - size
        done = {"choices": [{"index": 0, "text": "", "token_ids": [], "finish_reason": "length"}]}
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())


def main() -> None:
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    if os.environ.get("FAKE_VLLM") == "die":
        print("ValueError: the speculative config names no draft model", flush=True)
        sys.exit(1)
    subprocess.Popen(["sleep", "300"])  # the engine core: same process group
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
