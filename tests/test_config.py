"""Layering, validation errors (file, key, expectation; exit 2; nothing written), run files, the lock."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gropd import cli
from gropd.config import ConfigError, config_hash, load_manifests, resolve_run
from gropd.config.grids import expand_grid, load_grid, run_file_path, write_run_file
from gropd.config.lock import pin, pinned_revision, read_lock
from gropd.runs.pipeline import find_run_file

RUN = "table1__I4nothink-I1.7nothink__gropd"


def entry(experiments: Path, grid: str = "table1", index: int = 0):
    return expand_grid(load_grid(grid, experiments))[index]


def test_layers_apply_in_order_and_name_their_file(experiments: Path) -> None:
    manifests = load_manifests(experiments)
    run_file = find_run_file(manifests, "tiny", RUN)
    text = run_file.read_text().replace("gropd:\n  lam: 0.25", "gropd:\n  lam: 0.4")
    run_file.write_text(text)
    config = resolve_run(run_file, "tiny", manifests)
    profile = yaml.safe_load((experiments / "profiles" / "tiny.yaml").read_text())["train"]
    train = yaml.safe_load((experiments / "train.yaml").read_text())["train"]
    assert profile["prompts_per_batch"] != train["prompts_per_batch"]
    assert config.train.prompts_per_batch == profile["prompts_per_batch"]  # profile over train.yaml
    assert config.train.clip_low == 0.2  # train.yaml where the profile is silent
    assert config.gropd.lam == 0.4  # the edited run file over the grid's 0.25
    assert resolve_run(run_file, "tiny", manifests, ["gropd.lam=0.7"]).gropd.lam == 0.7  # command line last
    with pytest.raises(ConfigError) as err:
        resolve_run(run_file, "tiny", manifests, ["train.steps=0"])
    assert err.value.file == "command line" and err.value.key == "train.steps"
    run_file.write_text(text.replace("gropd:\n  lam: 0.4", "gropd:\n  lam: -0.4"))
    with pytest.raises(ConfigError) as err:
        resolve_run(run_file, "tiny", manifests)
    assert err.value.file == str(run_file) and err.value.key == "gropd.lam"


BAD_OVERRIDES = [
    (["gropd.lam=-0.1"], "gropd.lam", "greater than or equal to 0"),
    (["gropd.gamma=0"], "gropd.gamma", "greater than 0"),
    (["gropd.gamma=1.01"], "gropd.gamma", "less than or equal to 1"),
    (["train.group_size=1", "train.prompts_per_batch=64"], "train.group_size", "G >= 2 for GR-OPD"),
    (["eval.k={add: 0}"], "eval.k.add", "greater than or equal to 1"),
    (["train.lr=1e-3"], "train.lr", "unknown key"),
    (["train.steps=many"], "train.steps", "valid integer"),
    (["pairing=I8think-B1.7"], "pairing", "an override cannot change which run a run is"),
    (["eval.suites=[aime24]"], "eval.suites", "one of add"),
    (["gropd.std=sample"], "gropd.std", "'unbiased' or 'population'"),
    (["backend.max_tokens_per_forward=0"], "backend.max_tokens_per_forward", "greater than or equal to 1"),
    (["backend.max_tokens_per_forward=lots"], "backend.max_tokens_per_forward", "valid integer"),
]


@pytest.mark.parametrize(("overrides", "key", "expected"), BAD_OVERRIDES)
def test_bad_input_exits_2_names_key_and_writes_nothing(
    experiments: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, overrides, key, expected
) -> None:
    monkeypatch.chdir(tmp_path)
    find_run_file(load_manifests(experiments), "tiny", RUN)
    before = sorted(p for p in tmp_path.rglob("*"))
    assert cli.main(["run", RUN, "--profile", "tiny", *overrides]) == 2
    message = capsys.readouterr().err
    assert f"command line: {key}:" in message and expected in message
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_bad_manifests_name_file_and_key(experiments: Path) -> None:
    models = yaml.safe_load((experiments / "models.yaml").read_text())
    del models["paper"]["I4"]["source"]["revision"]
    (experiments / "models.yaml").write_text(yaml.safe_dump(models))
    with pytest.raises(ConfigError, match=r"models.yaml: paper.I4.source.revision: missing"):
        load_manifests(experiments)
    models["paper"]["I4"]["source"]["revision"] = "HEAD"
    (experiments / "models.yaml").write_text(yaml.safe_dump(models))
    with pytest.raises(ConfigError, match="is not a commit id"):
        load_manifests(experiments)


def test_unknown_pairing_model_and_suite_k(experiments: Path) -> None:
    pairings = yaml.safe_load((experiments / "pairings.yaml").read_text())
    pairings["B4-B1.7"]["teacher"]["model"] = "B8"
    (experiments / "pairings.yaml").write_text(yaml.safe_dump(pairings))
    with pytest.raises(ConfigError, match=r"pairings.yaml: B4-B1.7.teacher.model: 'B8' is not a model"):
        load_manifests(experiments)


def test_suite_with_k_zero_is_refused(experiments: Path) -> None:
    suites = yaml.safe_load((experiments / "suites.yaml").read_text())
    suites["paper"]["aime24"]["k"] = 0
    (experiments / "suites.yaml").write_text(yaml.safe_dump(suites))
    with pytest.raises(ConfigError, match=r"suites.yaml: paper.aime24.k: 0 \(expected an integer K >= 1\)"):
        load_manifests(experiments)


def test_unknown_grid_key_and_grid_name(experiments: Path) -> None:
    with pytest.raises(
        ConfigError,
        match="no grid named 'tabel1'.*one of baselines, collapse, fig1, gamma, lambda, long_cross, long_pilot, scale, "
        "table1, table6",
    ):
        load_grid("tabel1", experiments)
    grid = yaml.safe_load((experiments / "grids" / "gamma.yaml").read_text())
    grid["sweep"] = {}
    (experiments / "grids" / "gamma.yaml").write_text(yaml.safe_dump(grid))
    with pytest.raises(ConfigError, match="gamma.yaml: sweep: unknown key"):
        load_grid("gamma", experiments)
    grid = yaml.safe_load((experiments / "grids" / "fig1.yaml").read_text())
    grid["include"][1]["kind"] = "sample"
    (experiments / "grids" / "fig1.yaml").write_text(yaml.safe_dump(grid))
    with pytest.raises(
        ConfigError, match=r"fig1.yaml: include\[1\].kind: 'sample' \(expected train or eval or score\)"
    ):
        load_grid("fig1", experiments)


def test_score_runs_need_a_pairing_and_no_method(experiments: Path) -> None:
    manifests = load_manifests(experiments)
    values = entry(experiments, "fig1").values
    assert values["kind"] == "score"
    config = resolve_run(None, "tiny", manifests, entry_values=values)
    assert config.kind == "score" and config.method is None and config.pairing == "I4nothink-I1.7nothink"
    with pytest.raises(ConfigError, match="method: 'opd' \\(expected no method: a score run updates nothing\\)"):
        resolve_run(None, "tiny", manifests, ["method=opd"], entry_values=values)
    with pytest.raises(ConfigError, match="pairing: missing for a score run"):
        resolve_run(None, "tiny", manifests, entry_values={k: v for k, v in values.items() if k != "pairing"})


def test_run_file_edited_by_user_is_kept(experiments: Path) -> None:
    first = entry(experiments)
    runs = run_file_path(experiments, "tiny", first.run_id)
    path, state = write_run_file(first, runs)
    assert state == "written" and write_run_file(first, runs)[1] == "unchanged"
    path.write_text(path.read_text() + "seed: 7\n")
    assert write_run_file(first, runs)[1] == "kept edited"
    assert "seed: 7" in path.read_text()


def test_config_hash_changes_with_any_value(experiments: Path) -> None:
    manifests = load_manifests(experiments)
    values = entry(experiments).values
    base = config_hash(resolve_run(None, "tiny", manifests, entry_values=values))
    assert base == config_hash(resolve_run(None, "tiny", manifests, entry_values=values))
    assert base != config_hash(resolve_run(None, "tiny", manifests, ["gropd.eps=1e-5"], entry_values=values))


def test_pin_writes_full_revisions_and_runs_check_them(experiments: Path) -> None:
    manifests = load_manifests(experiments)
    lock_path = experiments / "lock.yaml"
    with pytest.raises(ConfigError, match="run `./reproduce.sh pin` first"):
        pinned_revision(read_lock(lock_path), "Qwen/Qwen3-4B", "1cfa9a7", lock_path)
    calls = []

    def fake_hub(kind: str, repo: str, revision: str) -> str:
        calls.append((kind, repo))
        return (revision + "0" * 40)[:40] if kind == "model" else "f" * 40

    pin(manifests, "paper", lock_path, resolver=fake_hub)
    assert pinned_revision(read_lock(lock_path), "Qwen/Qwen3-4B", "1cfa9a7", lock_path) == "1cfa9a7" + "0" * 33
    assert sum(kind == "model" for kind, _ in calls) == 5
    with pytest.raises(
        ConfigError, match=r"models.yaml: paper.B1.7.source.revision: the Hub resolved 'ea980cb' to 'abc"
    ):
        pin(manifests, "paper", lock_path, resolver=lambda kind, repo, rev: "abc" + "0" * 37)
    lock = read_lock(lock_path)  # a failed pin leaves the earlier lock whole
    assert lock["models"]["Qwen/Qwen3-4B"]["short"] == "1cfa9a7"
    with pytest.raises(ConfigError, match="asks for '1cfa9a8'"):
        pinned_revision(lock, "Qwen/Qwen3-4B", "1cfa9a8", lock_path)


def test_pin_locks_the_training_prompts_and_paper_runs_refuse_them_unpinned(experiments: Path, monkeypatch) -> None:
    from gropd.config.lock import profile_prompt_source
    from gropd.train.prompts import load_prompt_pool

    manifests = load_manifests(experiments)
    source = profile_prompt_source(manifests, "paper")
    assert source["repo"] == "agentica-org/DeepScaleR-Preview-Dataset"
    with pytest.raises(ConfigError, match=r"lock.yaml: datasets.agentica-org/DeepScaleR-Preview-Dataset: not pinned"):
        load_prompt_pool(source, "paper", manifests)
    pin(
        manifests,
        "paper",
        experiments / "lock.yaml",
        resolver=lambda kind, repo, rev: (rev + "0" * 40)[:40] if kind == "model" else "e" * 40,
    )
    assert read_lock(experiments / "lock.yaml")["datasets"][source["repo"]] == {"requested": "main", "full": "e" * 40}
    asked = {}
    monkeypatch.setattr(
        "eval.suites.load_questions", lambda spec, revision=None, **kw: asked.update(rev=revision) or []
    )
    load_prompt_pool(source, "paper", manifests)
    assert asked["rev"] == "e" * 40  # the pool loads at the locked revision, not `main`
