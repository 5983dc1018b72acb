"""World 5, the long-horizon twin (issue 66): its chain task, its profile's manifests, and world 4 left as it was."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from eval import tiny_tasks
from eval.grading import grade_batch
from gropd.config import load_manifests, resolve_run
from gropd.config.errors import ConfigError
from gropd.config.grids import expand_grid, load_grid
from gropd.runs.pipeline import grid_entries
from gropd.templates import render_target
from gropd.tiny.recipe import label_hash, load_recipe, parse_recipe
from gropd.tiny.tokenizer import build_tokenizer

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"

# 47+8-3+6-9+5-7, worked by hand column by column (ones first; "c"/"b": carry / borrow out):
#   47+8: 7+8=15 c1, 4+1=5 -> 55;  55-3 -> 52;  52+6 -> 58;  58-9: 18-9=9 b1, 5-1=4 -> 49;  49+5: 14 c1, 5 -> 54;
#   54-7: 14-7=7 b1, 5-1=4 -> 47
HAND_WORKED = """47+8-3+6-9+5-7: 7+8+0=15 c1 4+0+1=5 c0 so 55
55-3+6-9+5-7: 5-3-0=2 b0 5-0-0=5 b0 so 52
52+6-9+5-7: 2+6+0=8 c0 5+0+0=5 c0 so 58
58-9+5-7: 18-9-0=9 b1 5-0-1=4 b0 so 49
49+5-7: 9+5+0=14 c1 4+0+1=5 c0 so 54
54-7: 14-7-0=7 b1 5-0-1=4 b0 so 47
\\boxed{47}"""


def test_chain_worked_solution_is_the_hand_worked_one_and_math_verify_grades_it() -> None:
    question = "47+8-3+6-9+5-7"
    assert tiny_tasks.question_operands("chain", question) == (47, 8, -3, 6, -9, 5, -7)
    assert tiny_tasks.solve("chain", (47, 8, -3, 6, -9, 5, -7)) == 47
    assert tiny_tasks.worked_solution("chain", question, "brief") == HAND_WORKED
    # an early slip (47+8 written as 54 in the first step) carries into every later step and the answer, by hand:
    slipped = """47+8-3+6-9+5-7: 7+8+0=15 c1 4+0+1=5 c0 so 54
54-3+6-9+5-7: 4-3-0=1 b0 5-0-0=5 b0 so 51
51+6-9+5-7: 1+6+0=7 c0 5+0+0=5 c0 so 57
57-9+5-7: 17-9-0=8 b1 5-0-1=4 b0 so 48
48+5-7: 8+5+0=13 c1 4+0+1=5 c0 so 53
53-7: 13-7-0=6 b1 5-0-1=4 b0 so 46
\\boxed{46}"""
    assert slipped.splitlines()[1:] == tiny_tasks.worked_solution("chain", "54-3+6-9+5-7", "brief").splitlines()
    nothink = [render_target(text, answer, "nothink") for text, answer in ((HAND_WORKED, "47"), (slipped, "46"))]
    assert grade_batch(nothink, ["47", "47"]) == [True, False]
    think = render_target(HAND_WORKED, "47", "think")
    assert grade_batch([think], ["47"]) == [True]


def _steps(solution: str) -> list[tuple[int, tuple[int, ...], int]]:
    """(running value, the signed terms left, result) of each line of a chain's worked solution."""
    found = re.findall(r"^(\d+)((?:[+-]\d+)+): .* so (\d+)$", solution, flags=re.M)
    return [(int(v), tuple(int(x) for x in re.findall(r"[+-]\d+", rest)), int(r)) for v, rest, r in found]


def test_chain_questions_are_dependent_chains_of_the_intended_length() -> None:
    tokenizer = build_tokenizer()
    records = tiny_tasks.eval_questions("chain", 1000) + tiny_tasks.train_questions("chain", 300, seed=7)
    lengths = []
    for record in records:
        terms = tiny_tasks.question_operands("chain", record["question"])
        assert 6 <= len(terms) - 1 <= 9 and all(2 <= abs(x) <= 9 for x in terms[1:])
        solution = tiny_tasks.worked_solution("chain", record["question"], "brief")
        steps = _steps(solution)
        assert len(steps) == len(terms) - 1 and solution.splitlines()[0].startswith(record["question"] + ": ")
        value = terms[0]
        for k, (running, rest, result) in enumerate(steps, 1):  # each step starts from the previous step's result
            assert running == value and rest == terms[k:] and 10 <= running <= 99 and result == running + rest[0]
            value = result
        assert 10 <= value <= 99 and record["answer"] == str(value) and solution.endswith(f"\\boxed{{{value}}}")
        target = render_target(solution, record["answer"], "nothink")
        lengths.append(len(tokenizer(target, add_special_tokens=False)["input_ids"]))
    assert 200 <= min(lengths) and max(lengths) <= 500
    train = {r["question"] for r in records[1000:]}
    assert not train & {r["question"] for r in records[:1000]}


def test_chain_draws_keep_world4s_tasks_and_pools() -> None:
    assert tiny_tasks.TASKS == ("add", "sub", "mul", "add3", "mixed", "muladd")
    assert "chain" not in tiny_tasks.TASKS and tiny_tasks.check_task("chain") == "chain"
    rng = random.Random(3)
    drawn = [tiny_tasks.draw_operands("chain", rng) for _ in range(200)]
    assert {len(d) - 1 for d in drawn} == set(range(6, 10))  # every length 6-9 appears
    assert tiny_tasks.eval_questions("add", 2) + tiny_tasks.eval_questions("muladd", 1) == [  # world 4's, as before
        {"id": "add-0000", "question": "25+79", "answer": "104"},
        {"id": "add-0001", "question": "73+14", "answer": "87"},
        {"id": "muladd-0000", "question": "27*7+20", "answer": "209"},
    ]


def test_world4_hashes_are_those_it_was_built_with() -> None:
    recipe, full_hash = load_recipe(EXPERIMENTS / "tiny_world.yaml")
    built = json.loads((REPO / "results/tiny/world" / full_hash[:12] / "world.json").read_text())
    assert full_hash[:12] == "9958821e06c2" and built["recipe_hash"] == full_hash
    assert {label: label_hash(recipe, label) for label in built["models"]} == {
        label: entry["label_hash"] for label, entry in built["models"].items()
    }


def test_long_recipe_names_its_tasks_and_bad_tasks_are_refused() -> None:
    recipe, full_hash = load_recipe(EXPERIMENTS / "tiny_world_long.yaml")
    assert recipe.tasks == ("chain",) and set(recipe.models) == {"B4pre", "B4", "B1.7", "I4"}
    assert recipe.waves() == [["B4pre"], ["B4"], ["I4"]] and recipe.runs()["B4"] == ["B1.7", "B4"]
    assert recipe.modes("I4") == ("think", "nothink")
    assert full_hash != load_recipe(EXPERIMENTS / "tiny_world.yaml")[1]
    data = {"instruction": "x", "num_threads": 1, "parallel_builds": 1, "models": {}}
    data["eval"] = {"questions_per_task": 1, "max_new_tokens": 1, "batch_size": 1}
    with pytest.raises(ValueError, match=r"long.yaml: tasks: unknown tiny task 'chains'"):
        parse_recipe({**data, "tasks": ["chains"]}, "long.yaml")
    with pytest.raises(ValueError, match=r"long.yaml: tasks: an empty list"):
        parse_recipe({**data, "tasks": []}, "long.yaml")


def test_tiny_long_profile_resolves_its_runs_and_leaves_out_the_pairings_without_models() -> None:
    """World 5 builds its bases and the instruct teacher I4: the matched base pairing B4→B1.7 and the cross-pattern
    I4think→B1.7 run, the pairings that need I1.7 or I32 are left out."""
    manifests = load_manifests(EXPERIMENTS)
    assert "tiny-long" in manifests.profiles and set(manifests.models["tiny-long"]) == {"B1.7", "B4", "I4"}
    assert all(m["source"]["world"] == "tiny_world_long.yaml" for m in manifests.models["tiny-long"].values())
    assert set(manifests.suites["tiny-long"]) == {"chain"}
    assert grid_entries(manifests, ["gamma"], profile="tiny-long") == []  # all on I32nothink→I1.7nothink
    assert {e.run_id for e in grid_entries(manifests, ["lambda"], profile="tiny-long")} == {
        "lambda__I4think-B1.7__gropd-lam0",  # the λ grid's cross-pattern runs; its matched ones need I1.7
        "lambda__I4think-B1.7__opd",
    }
    expected = {
        "table1": {f"table1__{p}__{m}" for p in ("B4-B1.7", "I4think-B1.7") for m in ("gropd", "opd")},
        "table6": {"table6__B1.7-default", "table6__B4-default", "table6__I4-think", "table6__I4-nothink"},
        "fig1": {"fig1__B4-B1.7__score", "fig1__I4think-B1.7__score"},
    }
    for name, run_ids in expected.items():
        entries = grid_entries(manifests, [name], profile="tiny-long")
        assert {e.run_id for e in entries} == run_ids
        for entry in entries:
            config = resolve_run(None, "tiny-long", manifests, entry_values=entry.values)
            assert config.run_id == entry.run_id and config.sampling.max_new_tokens == 432
            assert config.train.prompts.source["tasks"] == ["chain"]
    assert {e.run_id for e in grid_entries(manifests, ["table1"], profile="tiny")} == {
        e.run_id for e in expand_grid(load_grid("table1", EXPERIMENTS))
    }
    i32 = next(e for e in expand_grid(load_grid("table1", EXPERIMENTS)) if "I32nothink" in e.run_id)
    with pytest.raises(ConfigError, match="names I32, I1.7, not a model of profile 'tiny-long'"):
        resolve_run(None, "tiny-long", manifests, entry_values=i32.values)


def test_world5_is_committed_as_its_recipe_builds_it() -> None:
    """The committed world 5 is the one its recipe names (hash), every model with its own label hash, and its
    measured teacher above its student (greedy held-out accuracy, world.json)."""
    recipe, full_hash = load_recipe(EXPERIMENTS / "tiny_world_long.yaml")
    world = REPO / "results/tiny/world" / full_hash[:12]
    built = json.loads((world / "world.json").read_text())
    assert built["recipe_hash"] == full_hash and set(built["models"]) == set(recipe.models)
    assert {label: label_hash(recipe, label) for label in recipe.models} == {
        label: entry["label_hash"] for label, entry in built["models"].items()
    }
    assert all((world / "models" / label / "model.safetensors").is_file() for label in recipe.models)
    accuracy = {label: built["models"][label]["accuracy"]["default"]["chain"] for label in ("B4", "B1.7")}
    assert accuracy["B4"] - accuracy["B1.7"] >= 0.10 and built["models"]["B1.7"]["step"] == 300
    assert built["models"]["I4"]["accuracy"]["think"]["chain"] - accuracy["B1.7"] >= 0.10


def test_world5s_bases_are_the_bytes_the_pilot_ran_on() -> None:
    """Adding I4 made a new world directory; its bases are file for file those of 8ad821db8a65, the world the pilot
    (grid long_pilot) ran on, which stays committed as its record."""
    _, full_hash = load_recipe(EXPERIMENTS / "tiny_world_long.yaml")
    now = json.loads((REPO / "results/tiny/world" / full_hash[:12] / "world.json").read_text())["files"]
    pilot = json.loads((REPO / "results/tiny/world/8ad821db8a65/world.json").read_text())["files"]
    assert full_hash[:12] != "8ad821db8a65" and {f for f in now if not f.startswith("models/I4/")} == set(pilot)
    assert {f: now[f] for f in pilot} == pilot
