"""A teacher server on one machine with transformers, speaking the part of `vllm serve`'s protocol that
ServerTeacher uses (gropd/model/teacher/server.py): where vLLM is not installed (a CPU, the rehearsal), the
paper profile's `backend.teacher: server` path runs unchanged against it.

    python -m gropd.model.teacher.local_server --model DIR [--tokenizer DIR] --served-model-name NAME
                                         [--host 127.0.0.1] [--port 0] [--dtype bfloat16]
                                         [--max-tokens-per-forward 16384] [--threads 1]

    GET  /health           200, no body, while it serves (vLLM's liveness route)
    GET  /v1/models        {"object": "list", "data": [{"id": NAME, "object": "model", "root": DIR}]}
    POST /v1/completions   {"model": NAME, "prompt": [[token ids], ...], "max_tokens": 1, "prompt_logprobs": 0}
                           -> {"choices": [{"index": i, "prompt_logprobs": [null, {"<id>": {"logprob": ...,
                               "rank": ..., "decoded_token": null}}, ...], ...}]}

Entry p >= 1 of a row's prompt_logprobs is log π_T(x_p | x_<p) under the model in `--dtype` (vLLM's
raw log-probs at temperature 1). It prints `listening on http://HOST:PORT` once ready (port 0 picks a
free one) and one line per request to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

from gropd.model.checkpoints import CheckpointRef, load_model
from gropd.model.forward_batches import no_grad_logprobs


def prompt_logprobs(model: torch.nn.Module, rows: list[list[int]], max_tokens: int) -> list[list[dict | None]]:
    """vLLM-shaped prompt_logprobs of each row: None at position 0, then {"<token>": Logprob} entries."""
    if any(len(row) < 2 for row in rows):
        raise ValueError("every prompt needs at least 2 tokens: position 0 has no log-prob")
    logp, _ = no_grad_logprobs(model, [row[:1] for row in rows], [row[1:] for row in rows], 0, model.device, max_tokens)
    out = []
    for row, values in zip(rows, logp.tolist(), strict=True):
        entries = [
            {str(token): {"logprob": value, "rank": None, "decoded_token": None}}
            for token, value in zip(row[1:], values, strict=False)
        ]
        out.append([None, *entries])
    return out


def completion_body(model: torch.nn.Module, request: dict[str, Any], served: str, max_tokens: int) -> dict[str, Any]:
    """The /v1/completions answer for one request (prompt_logprobs only: nothing is generated)."""
    if request.get("model") != served:
        raise ValueError(f"model {request.get('model')!r} is not served here (serving {served!r})")
    rows = request["prompt"]
    if rows and isinstance(rows[0], int):
        rows = [rows]
    choices = [
        {
            "index": i,
            "text": "",
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
            "prompt_logprobs": logprobs,
        }
        for i, logprobs in enumerate(prompt_logprobs(model, rows, max_tokens))
    ]
    return {"id": "cmpl-local", "object": "text_completion", "model": served, "choices": choices}


def serve(model: torch.nn.Module, served: str, root: str, host: str, port: int, max_tokens: int) -> ThreadingHTTPServer:
    """A started server (serving in a daemon thread); `server.server_address` has its port."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/health":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path.rstrip("/") != "/v1/models":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            self._send(200, {"object": "list", "data": [{"id": served, "object": "model", "root": root}]})

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            try:
                with lock:
                    body = completion_body(model, request, served, max_tokens)
            except (ValueError, KeyError, TypeError) as err:
                self._send(400, {"error": {"message": str(err)}})
                return
            tokens = sum(len(row) for row in request["prompt"]) if request["prompt"] else 0
            print(f"scored {len(body['choices'])} rows ({tokens} tokens)", file=sys.stderr, flush=True)
            self._send(200, body)

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--max-tokens-per-forward", type=int, default=16384)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ref = CheckpointRef(args.model, None, args.tokenizer or args.model)
    model = load_model(ref, torch.device("cpu"), args.dtype).eval()
    server = serve(model, args.served_model_name, args.model, args.host, args.port, args.max_tokens_per_forward)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", file=sys.stderr, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
