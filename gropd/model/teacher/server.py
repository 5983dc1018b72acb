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

Start-up: `vllm serve` answers only once its model is loaded (minutes for a 32B: download, load,
compile), and a job array may start before its server. The client waits for `/v1/models` up to
`start_wait_s` (GROPD_TEACHER_WAIT_S, gropd/model/components.py), polling every POLL_S seconds and saying
what it waits for once a minute; a server that answers with another model fails at once. The card's
`max_model_len` must hold the run's longest row + the 1 token vLLM generates (`context`), else it refuses
before scoring; a longer row is refused before it is sent (PromptTooLongError), not answered with HTTP 400.

Requests: transient failures (connection errors, timeouts, HTTP 429/500/502/503/504) are retried
with exponential backoff, backoff_s · 2^k before retry k+1, at most max_retries times;
any other HTTP error fails at once. Field names checked against vLLM 0.32.0's
`CompletionResponseChoice` and vLLM 0.33.0's `ModelCard` (vllm/entrypoints/serve/engine/protocol.py).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from gropd.model.rollout.base import require_within
from gropd.model.teacher.vllm_engine import response_logprobs_from_prompt_logprobs

TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
POLL_S = 10.0  # seconds between start-up checks of /v1/models


class TeacherServerError(RuntimeError):
    """The teacher server refused a request, answered nonsense, or stayed unreachable."""


class TeacherServerUnavailable(TeacherServerError):
    """Every try of a request failed transiently (refused, timed out, 429/5xx)."""


def served_model_name(repo: str, revision: str | None) -> str:
    """The `--served-model-name` the launch script gives a teacher: `<repo>@<revision>`."""
    return f"{repo}@{revision}" if revision else repo


def completion_payload(served_name: str, rows: list[list[int]]) -> dict[str, Any]:
    """The /v1/completions body that scores every row's tokens in one prefill each."""
    return {"model": served_name, "prompt": rows, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0}


def batch_slices(n_rows: int, batch_size: int) -> list[slice]:
    """Consecutive row slices of at most batch_size rows, in order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    return [slice(start, min(start + batch_size, n_rows)) for start in range(0, n_rows, batch_size)]


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


def wait_for_server(base_url: str, expected: str, wait_s: float) -> dict[str, Any]:
    """The `/v1/models` card of `expected` once the server answers (polled every POLL_S seconds for up to
    wait_s, a line on stderr each minute); TeacherServerError when it never does or serves another model."""
    sleep, clock = time.sleep, time.monotonic
    url, start, said = f"{base_url}/v1/models", clock(), 0.0
    while True:
        try:
            body = request_json(url, None, timeout_s=POLL_S, max_retries=0, backoff_s=0.0)
            return check_served_model(body, expected, base_url)
        except TeacherServerUnavailable as err:  # not up yet; any answer (another model, HTTP 4xx) fails at once
            last = str(err).split("last error: ", 1)[-1]
        waited = clock() - start
        if waited >= wait_s:
            raise TeacherServerError(
                f"teacher server {base_url} did not answer /v1/models with {expected!r} within {wait_s:.0f} s "
                f"(last: {last}); is experiments/launch/teacher_server.sh running there? Set GROPD_TEACHER_WAIT_S "
                "to wait longer (a queued server job, a first download)"
            )
        if waited - said >= 60 or not said:
            said = max(waited, 1e-9)
            print(
                f"waiting for the teacher server {base_url} to serve {expected} ({waited:.0f} of {wait_s:.0f} s; "
                f"{last}): `vllm serve` answers once its model is loaded",
                file=sys.stderr,
                flush=True,
            )
        sleep(min(POLL_S, max(0.0, wait_s - waited)))


def request_json(
    url: str,
    payload: dict[str, Any] | None,
    *,
    timeout_s: float,
    max_retries: int,
    backoff_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """GET (payload None) or POST JSON to url with bounded retries on transient failures."""
    data = None if payload is None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    last_error = ""
    for attempt in range(max_retries + 1):
        if attempt:
            sleep(backoff_s * 2 ** (attempt - 1))
        try:
            request = urllib.request.Request(url, data=data, headers=headers)
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:500]
            if err.code not in TRANSIENT_STATUS:
                raise TeacherServerError(f"{url} answered HTTP {err.code}: {detail}") from err
            last_error = f"HTTP {err.code}: {detail}"
        except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
            last_error = f"{type(err).__name__}: {err}"
    raise TeacherServerUnavailable(f"{url} failed {max_retries + 1} times; last error: {last_error}")


class ServerTeacher:
    """TeacherScorer on a remote `vllm serve` that serves `<model>@<revision>`."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        revision: str | None,
        batch_size: int,
        timeout_s: float,
        max_retries: int,
        backoff_s: float,
        start_wait_s: float,
        context: int | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.served_name = served_model_name(model, revision)
        self.batch_size = batch_size
        self._retry = {"timeout_s": timeout_s, "max_retries": max_retries, "backoff_s": backoff_s}
        card = wait_for_server(self.base_url, self.served_name, start_wait_s)
        self.max_model_len = card.get("max_model_len")
        if context is not None and self.max_model_len is not None and self.max_model_len < context:
            raise TeacherServerError(
                f"teacher server {self.base_url} has max_model_len {self.max_model_len}, but this run's rows need "
                f"{context} (backend.max_prompt_tokens + sampling.max_new_tokens + the 1 token vLLM generates); "
                f"start it with MAX_MODEL_LEN={context} experiments/launch/teacher_server.sh"
            )

    def score(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> list[list[float]]:
        """log π_T of every response token; rows go out in batches of batch_size, order kept."""
        if len(prompt_ids) != len(response_ids):
            raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
        if self.max_model_len is not None:
            require_within(
                [len(p) + len(r) for p, r in zip(prompt_ids, response_ids, strict=True)],
                self.max_model_len - 1,
                f"the teacher server's context (max_model_len {self.max_model_len} - the 1 token vLLM generates)",
                "backend.max_prompt_tokens above the longest teacher prompt (and the server's MAX_MODEL_LEN)",
            )
        out: list[list[float]] = []
        for rows in batch_slices(len(prompt_ids), self.batch_size):
            prompts, responses = prompt_ids[rows], response_ids[rows]
            payload = completion_payload(self.served_name, [p + r for p, r in zip(prompts, responses, strict=True)])
            body = request_json(f"{self.base_url}/v1/completions", payload, **self._retry)
            out.extend(parse_completion_response(body, prompts, responses))
        return out
