"""Teacher scoring through a remote `vllm serve` (`backend.teacher: server`), standard library only.

The 32B teacher runs on its own node (experiments/launch/teacher_server.sh). Each batch
of rows is one POST to the OpenAI-compatible `/v1/completions` with

    {"model": <served name>, "prompt": [[token ids of x_T + y], ...],
     "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0}

`prompt_logprobs` is a vLLM extension: every choice carries `prompt_logprobs`, a list
over prompt positions whose entry 0 is null and entry p is {"<token id>": {"logprob",
"rank", "decoded_token"}} holding the actual token (vLLM clamps -inf to -9999.0).
Choice `index` i answers prompt i. (The OpenAI-standard alternative, `echo: true` with
`logprobs: 0`, returns the same numbers in `logprobs.token_logprobs` but also decodes
text; this client does not use it.)

Served-name convention: the server is started with `--revision <full id>` and
`--served-model-name <repo>@<full id>`, because `/v1/models` reports only the served
name (and `root`, the repo), never the revision. The client refuses to score when the
served name differs from `<model>@<revision>` (or `<model>` when revision is None).

Address (TeacherAddress): a fixed `backend.teacher_url`, or, without one, the address file the server's launch
script keeps on shared storage, `<GROPD_TEACHER_DIR or .teachers>/<LABEL>.url` (one line, http://host:port;
experiments/launch/teacher_server.sh writes it each time it starts, so a requeued server on another node
rewrites it). The file is read again at every (re)connection: a server that moved is found.

Waiting: `vllm serve` answers only once its model is loaded (minutes for a 32B: download, load, compile), a job
array may start before its server, and a server may end or be preempted mid-run. At start-up and whenever a
request finds the server gone, the client waits up to `wait_s` (GROPD_TEACHER_WAIT_S, gropd/model/components.py)
for the server at the current address to be alive, then sends the request again: `GET /health` answers 200 while
its engine lives and 503 once it died (vLLM's health route awaits `EngineClient.check_health()`, which raises
EngineDeadError when the engine has died and reads nothing queued: vllm/entrypoints/serve/instrumentator/health.py
and vllm/v1/engine/async_llm.py, read in vLLM's v0.15-v0.17 and main sources), and `/v1/models` lists its card,
neither behind the requests a busy server has queued. It polls with backoff (FIRST_POLL_S, doubling up to POLL_S)
and says what it waits for once a minute; a server that answers with another model fails at once. The card's
`max_model_len` must hold the run's longest row + the 1 token vLLM generates (`context`), else it refuses before
scoring (checked again after a reconnection); a longer row is refused before it is sent (PromptTooLongError), not
answered with HTTP 400.

Requests: rows go out in requests of at most `batch_size` rows and `max_request_tokens` tokens (a longer row
alone), `concurrency` of them in flight at once (GROPD_TEACHER_CONCURRENCY, gropd/model/components.py: one request
at a time left a data-parallel server's replicas idle while it prefilled), and the answers are put back in row
order; a request of n tokens may take `timeout_s + n / SLOWEST_TOKENS_PER_S` seconds: a large batch is
never one request that may legitimately outlast a fixed timeout, and a timeout resends only its own rows (vLLM
cancels the request a client gave up on: `with_cancellation` on its completions route, vLLM 0.33.0). Transient
failures (connection errors, timeouts, HTTP 429/500/502/503/504, a body cut short or not JSON) are retried with
exponential backoff,
backoff_s · 2^k before retry k+1, at most max_retries times, then the client waits for the server as above; any
other HTTP error fails at once. Field names checked against vLLM 0.32.0's `CompletionResponseChoice` and vLLM
0.33.0's `ModelCard` (vllm/entrypoints/serve/engine/protocol.py).
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gropd.model.rollout.base import require_within
from gropd.model.teacher.vllm_engine import response_logprobs_from_prompt_logprobs

TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
POLL_S = 10.0  # the longest pause between two looks at a server that is away
FIRST_POLL_S = 1.0  # the first pause; each later one doubles, up to POLL_S
# The slowest share of a server a request is expected to get: a 32B `vllm serve` on 8 GPUs prefills some 10-20k
# tokens/s in all, and four 32B runs x 8 ranks share it first come first served (ours, an estimate).
SLOWEST_TOKENS_PER_S = 200.0
TEACHER_DIR_ENV = "GROPD_TEACHER_DIR"
TEACHER_DIR = ".teachers"


class TeacherServerError(RuntimeError):
    """The teacher server refused a request, answered nonsense, or stayed unreachable."""


class TeacherServerUnavailable(TeacherServerError):
    """Every try of a request failed transiently (refused, timed out, 429/5xx)."""


class TeacherServerAway(TeacherServerError):
    """The server stayed away (not alive, or not answering a request) for the whole wait, GROPD_TEACHER_WAIT_S."""


def served_model_name(repo: str, revision: str | None) -> str:
    """The `--served-model-name` the launch script gives a teacher: `<repo>@<revision>`."""
    return f"{repo}@{revision}" if revision else repo


def completion_payload(served_name: str, rows: list[list[int]]) -> dict[str, Any]:
    """The /v1/completions body that scores every row's tokens in one prefill each."""
    return {"model": served_name, "prompt": rows, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0}


@dataclass(frozen=True)
class TeacherAddress:
    """Where a teacher server answers: a fixed `url`, or the address `file` its launch script keeps current."""

    url: str | None = None
    file: Path | None = None

    def current(self) -> str | None:
        """http://host:port as it is now (the file read again), None while the file names none."""
        if self.url:
            return self.url.rstrip("/")
        try:
            return self.file.read_text().strip().rstrip("/") or None
        except OSError:
            return None

    def describe(self) -> str:
        return self.url or f"the address in {self.file}"


def teacher_address(url: str | None, label: str, environ: Mapping[str, str]) -> TeacherAddress:
    """`url` (backend.teacher_url) when given, else teacher `label`'s address file under GROPD_TEACHER_DIR
    (default .teachers, from the directory runs start in: the repository root)."""
    if url:
        return TeacherAddress(url=url)
    return TeacherAddress(file=Path(environ.get(TEACHER_DIR_ENV) or TEACHER_DIR) / f"{label}.url")


def request_slices(lengths: list[int], max_rows: int, max_tokens: int) -> list[slice]:
    """Consecutive row slices, in order, of at most max_rows rows and max_tokens tokens (a longer row alone)."""
    if max_rows < 1 or max_tokens < 1:
        raise ValueError(f"max_rows and max_tokens must be at least 1, got {max_rows} and {max_tokens}")
    slices, start, tokens = [], 0, 0
    for row, length in enumerate(lengths):
        if row > start and (row - start == max_rows or tokens + length > max_tokens):
            slices.append(slice(start, row))
            start, tokens = row, 0
        tokens += length
    return slices + ([slice(start, len(lengths))] if lengths else [])


def parse_completion_response(
    body: dict[str, Any], prompt_ids: list[list[int]], response_ids: list[list[int]]
) -> list[list[float]]:
    """[rows][T_r] response-token log-probs from one /v1/completions answer, in request order."""
    choices = sorted(body.get("choices") or [], key=lambda c: c["index"])
    if [c["index"] for c in choices] != list(range(len(prompt_ids))):
        raise TeacherServerError(
            f"expected choices 0..{len(prompt_ids) - 1}, got indices {[c['index'] for c in choices]}"
        )
    out = []
    for choice, prompt, response in zip(choices, prompt_ids, response_ids, strict=True):
        if choice.get("prompt_logprobs") is None:
            raise TeacherServerError(f"choice {choice['index']} has no prompt_logprobs: is the server vLLM?")
        out.append(response_logprobs_from_prompt_logprobs(choice["prompt_logprobs"], len(prompt), response))
    return out


def check_served_model(models_body: dict[str, Any], expected: str, base_url: str) -> dict[str, Any]:
    """The `/v1/models` card of `expected` (the manifest's `<repo>@<revision>`); TeacherServerError if absent."""
    cards = {card.get("id"): card for card in models_body.get("data") or []}
    if expected not in cards:
        raise TeacherServerError(
            f"teacher server {base_url} serves {list(cards)}, but the manifest expects {expected!r}; "
            "start it with experiments/launch/teacher_server.sh (which sets --revision and "
            "--served-model-name <repo>@<revision> from experiments/lock.yaml)"
        )
    return cards[expected]


def server_card(base_url: str, expected: str, timeout_s: float) -> dict[str, Any]:
    """The `/v1/models` card of `expected` once `GET /health` says the server's engine lives: liveness, never a
    generation (a busy server answers both at once). TeacherServerUnavailable when either does not answer (503: an
    engine that died, or a server draining), TeacherServerError when the server lists another model."""
    request_json(f"{base_url}/health", None, timeout_s=timeout_s, max_retries=0, backoff_s=0.0, decode=lambda _: {})
    body = request_json(f"{base_url}/v1/models", None, timeout_s=timeout_s, max_retries=0, backoff_s=0.0)
    return check_served_model(body, expected, base_url)


def wait_for_server(address: TeacherAddress, expected: str, wait_s: float) -> tuple[str, dict[str, Any]]:
    """(base URL, `/v1/models` card of `expected`) once the server is alive at its current address (server_card),
    looked at after pauses of FIRST_POLL_S doubling to POLL_S for up to wait_s, a line on stderr each minute;
    TeacherServerError when it never is or serves another model."""
    sleep, clock = time.sleep, time.monotonic
    start, said, pause = clock(), 0.0, FIRST_POLL_S
    while True:
        base_url = address.current()
        try:
            if base_url is None:
                raise TeacherServerUnavailable(f"last error: no address yet in {address.file}")
            return base_url, server_card(base_url, expected, POLL_S)
        except TeacherServerUnavailable as err:  # not up yet; any answer (another model, HTTP 4xx) fails at once
            last = str(err).split("last error: ", 1)[-1]
        waited = clock() - start
        if waited >= wait_s:
            raise TeacherServerAway(
                f"the teacher server ({address.describe()}) was not alive with {expected!r} (/health, /v1/models) "
                f"within {wait_s:.0f} s (last: {last}); is experiments/launch/teacher_server.sh running? Set "
                "GROPD_TEACHER_WAIT_S to wait longer (a queued or requeued server job, a first download)"
            )
        if waited - said >= 60 or not said:
            said = max(waited, 1e-9)
            print(
                f"waiting for the teacher server ({base_url or address.describe()}) to serve {expected} "
                f"({waited:.0f} of {wait_s:.0f} s; {last}): `vllm serve` answers once its model is loaded",
                file=sys.stderr,
                flush=True,
            )
        sleep(min(pause, max(0.0, wait_s - waited)))
        pause = min(POLL_S, 2 * pause)


def request_json(
    url: str,
    payload: dict[str, Any] | None,
    *,
    timeout_s: float,
    max_retries: int,
    backoff_s: float,
    sleep: Callable[[float], None] = time.sleep,
    decode: Callable[[bytes], Any] = json.loads,
) -> dict[str, Any]:
    """GET (payload None) or POST JSON to url with bounded retries on transient failures; the answer's body as
    `decode` reads it (JSON; /health's is empty)."""
    data = None if payload is None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    last_error = ""
    for attempt in range(max_retries + 1):
        if attempt:
            sleep(backoff_s * 2 ** (attempt - 1))
        try:
            request = urllib.request.Request(url, data=data, headers=headers)
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return decode(response.read())
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:500]
            if err.code not in TRANSIENT_STATUS:
                raise TeacherServerError(f"{url} answered HTTP {err.code}: {detail}") from err
            last_error = f"HTTP {err.code}: {detail}"
        except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException, ValueError) as err:
            last_error = f"{type(err).__name__}: {err}"  # HTTPException: a body cut short; ValueError: not JSON
    raise TeacherServerUnavailable(f"{url} failed {max_retries + 1} times; last error: {last_error}")


class ServerTeacher:
    """TeacherScorer on a remote `vllm serve` that serves `<model>@<revision>`, wherever it answers now."""

    def __init__(
        self,
        address: TeacherAddress,
        *,
        model: str,
        revision: str | None,
        batch_size: int,
        max_request_tokens: int,
        timeout_s: float,
        max_retries: int,
        backoff_s: float,
        wait_s: float,
        context: int | None = None,
        concurrency: int = 1,
    ) -> None:
        self.address, self.served_name = address, served_model_name(model, revision)
        self.batch_size, self.max_request_tokens, self.timeout_s = batch_size, max_request_tokens, timeout_s
        self.wait_s, self.context, self.concurrency = wait_s, context, concurrency
        self._retry = {"max_retries": max_retries, "backoff_s": backoff_s}
        self._connecting = threading.Lock()  # requests in flight that find the server gone reconnect one at a time
        self._connect(wait_s)

    def _connect(self, wait_s: float) -> None:
        """Wait for the server at its current address and check its card (its context holds our rows)."""
        with self._connecting:
            self._connect_now(wait_s)

    def _connect_now(self, wait_s: float) -> None:
        self.base_url, card = wait_for_server(self.address, self.served_name, wait_s)
        self.max_model_len = card.get("max_model_len")
        if self.context is not None and self.max_model_len is not None and self.max_model_len < self.context:
            raise TeacherServerError(
                f"teacher server {self.base_url} has max_model_len {self.max_model_len}, but this run's rows need "
                f"{self.context} (backend.max_prompt_tokens + sampling.max_new_tokens + the 1 token vLLM generates); "
                f"start it with MAX_MODEL_LEN={self.context} experiments/launch/teacher_server.sh"
            )

    def score(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> list[list[float]]:
        """log π_T of every response token; rows go out in requests of request_slices, order kept."""
        if len(prompt_ids) != len(response_ids):
            raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
        lengths = [len(p) + len(r) for p, r in zip(prompt_ids, response_ids, strict=True)]
        if self.max_model_len is not None:
            require_within(
                lengths,
                self.max_model_len - 1,
                f"the teacher server's context (max_model_len {self.max_model_len} - the 1 token vLLM generates)",
                "backend.max_prompt_tokens above the longest teacher prompt (and the server's MAX_MODEL_LEN)",
            )

        def scored(rows: slice) -> list[list[float]]:
            prompts, responses = prompt_ids[rows], response_ids[rows]
            payload = completion_payload(self.served_name, [p + r for p, r in zip(prompts, responses, strict=True)])
            return parse_completion_response(self._complete(payload, sum(lengths[rows])), prompts, responses)

        slices = request_slices(lengths, self.batch_size, self.max_request_tokens)
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(slices)))) as pool:
            return [row for answer in pool.map(scored, slices) for row in answer]  # map keeps the requests' order

    def _complete(self, payload: dict[str, Any], tokens: int) -> dict[str, Any]:
        """The server's answer to one request of `tokens` tokens (timed by its size); while the server is gone
        (refused, silent, 5xx, moved) the request is sent again once it answers, for up to wait_s in all."""
        timeout_s = self.timeout_s + tokens / SLOWEST_TOKENS_PER_S
        gone_at = None
        while True:
            try:
                url = f"{self.base_url}/v1/completions"
                return request_json(url, payload, timeout_s=timeout_s, **self._retry)
            except TeacherServerUnavailable as err:
                gone_at = time.monotonic() if gone_at is None else gone_at
                left = self.wait_s - (time.monotonic() - gone_at)
                if left <= 0:
                    raise TeacherServerAway(
                        f"the teacher server ({self.address.describe()}) has not answered this request for "
                        f"{self.wait_s:.0f} s (GROPD_TEACHER_WAIT_S): {err}"
                    ) from err
                print(
                    f"the teacher server {self.base_url} did not answer mid-run ({err}); waiting up to {left:.0f} s "
                    f"(GROPD_TEACHER_WAIT_S) for it at {self.address.describe()}, then this request ({tokens} "
                    "tokens) is sent again",
                    file=sys.stderr,
                    flush=True,
                )
                self._connect(left)
