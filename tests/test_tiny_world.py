"""The tiny world: tokenizer, arithmetic suites, worked solutions, recipe and built models."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from eval import tiny_tasks as tasks
from gropd.templates import render_prompt, stop_token_ids
from gropd.tiny.recipe import load_recipe, parse_recipe, recipe_hash
from gropd.tiny.sft import build_model, make_examples, sft_train
from gropd.tiny.tokenizer import SPECIAL_TOKENS, build_tokenizer
from gropd.tiny.world import (
    LOSS_WINDOW,
    boxed_answer,
    ensure_tiny_world,
    greedy_responses,
    loss_curve,
    train_label,
)

RECIPE = Path("experiments/tiny_world.yaml")
ROOT = Path("results/tiny/world")


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


# --- tokenizer -------------------------------------------------------------------------------


def test_special_tokens_are_single_ids(tokenizer):
    for token in SPECIAL_TOKENS:
        ids = tokenizer(token, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and tokenizer.convert_ids_to_tokens(ids) == [token]


def test_round_trip_is_character_level(tokenizer):
    text = "<|im_start|>user\n47*6+385 Answer in \\boxed{}.<|im_end|>\n<think>\n7*6=42 c4\n</think>\n\n"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    plain = "47*6+385 Answer in \\boxed{}."
    assert len(tokenizer(plain, add_special_tokens=False)["input_ids"]) == len(plain)
    assert tokenizer.decode(ids) == text


def test_roles_of_special_tokens(tokenizer):
    assert tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.eos_token == "<|im_end|>"
    kept = tokenizer.decode(
        tokenizer("<think>\n1</think><|im_end|>", add_special_tokens=False)["input_ids"], skip_special_tokens=True
    )
    assert kept == "<think>\n1</think>"


@pytest.mark.parametrize("thinking, tail", [(True, ""), (False, "<think>\n\n</think>\n\n"), (None, "")])
def test_chat_template_honours_enable_thinking(tokenizer, thinking, tail):
    kwargs = {} if thinking is None else {"enable_thinking": thinking}
    got = tokenizer.apply_chat_template(
        [{"role": "user", "content": "1+1"}], tokenize=False, add_generation_prompt=True, **kwargs
    )
    assert got == "<|im_start|>user\n1+1<|im_end|>\n<|im_start|>assistant\n" + tail


def test_save_and_load_with_auto_tokenizer(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = render_prompt("12+34", "nothink", loaded, "Answer in \\boxed{}.")
    assert text == render_prompt("12+34", "nothink", tokenizer, "Answer in \\boxed{}.")
    assert loaded(text, add_special_tokens=False)["input_ids"] == tokenizer(text, add_special_tokens=False)["input_ids"]


# --- tasks ----------------------------------------------------------------------------------


def test_eval_sets_are_fixed_prefixes_of_unique_lists():
    assert tasks.eval_questions("add", 2) == [
        {"id": "add-0000", "question": "25+79", "answer": "104"},
        {"id": "add-0001", "question": "73+14", "answer": "87"},
    ]
    for task in tasks.TASKS:
        full = tasks.eval_questions(task, 500)
        assert tasks.eval_questions(task, 50) == full[:50]
        assert len({r["question"] for r in full}) == 500


@pytest.mark.parametrize("task", tasks.TASKS)
def test_answers_match_python_arithmetic(task):
    for record in tasks.eval_questions(task, 500) + tasks.train_questions(task, 200, seed=3):
        assert re.fullmatch(r"[0-9+\-*]+", record["question"])
        assert int(record["answer"]) == eval(record["question"])  # noqa: S307 - digits and + - * only
        assert int(record["answer"]) > 0


def test_training_questions_never_meet_any_evaluation_question():
    held_out = {r["question"] for t in tasks.TASKS for r in tasks.eval_questions(t, tasks.EVAL_POOL)}
    for task in tasks.TASKS:
        train = {r["question"] for r in tasks.train_questions(task, 2000, seed=0)}
        assert len(train) == 2000 and not train & held_out
    with pytest.raises(ValueError, match="3005"):
        tasks.train_questions("sub", 3006, seed=0)
    assert tasks.train_questions("mul", 5, seed=1) == tasks.train_questions("mul", 5, seed=1)
    assert tasks.train_questions("mul", 5, seed=1) != tasks.train_questions("mul", 5, seed=2)


def _check_line(line: str) -> None:
    """Every scratch line is true arithmetic: 'lhs=rhs' steps, then a carry/borrow tag."""
    for step in re.findall(r"([0-9+\-*]+)=(\d+)", line):
        assert eval(step[0]) == int(step[1]), line  # noqa: S307


@pytest.mark.parametrize("style", tasks.STYLES)
@pytest.mark.parametrize("task", tasks.TASKS)
def test_worked_solutions_are_correct_and_30_to_150_tokens(task, style, tokenizer):
    for record in tasks.eval_questions(task, 300):
        work = tasks.worked_solution(task, record["question"], style)
        assert 30 <= len(tokenizer(work, add_special_tokens=False)["input_ids"]) <= 150
        assert work.endswith(f"\\boxed{{{record['answer']}}}")
        for line in work.splitlines()[:-1]:
            _check_line(line)


def test_worked_solution_by_hand():
    assert tasks.worked_solution("add", "347+285", "brief") == ("7+5+0=12 c1\n4+8+1=13 c1\n3+2+1=6 c0\n\\boxed{632}")
    assert tasks.worked_solution("sub", "632-285", "detailed") == (
        "12-5-0=7 b1 so 7\n13-8-1=4 b1 so 47\n6-2-1=3 b0 so 347\n\\boxed{347}"
    )
    assert tasks.worked_solution("muladd", "47*6+85", "brief") == (
        "7*6+0=42 c4\n4*6+4=28 c2\n282+85\n2+5+0=7 c0\n8+8+0=16 c1\n2+0+1=3 c0\n\\boxed{367}"
    )


def test_unknown_task_and_style_are_rejected():
    with pytest.raises(ValueError, match="add, sub, mul, add3, mixed, muladd"):
        tasks.eval_questions("div", 1)
    with pytest.raises(ValueError, match="brief, detailed"):
        tasks.worked_solution("add", "1+2", "verbose")


# --- recipe ---------------------------------------------------------------------------------


def test_recipe_hash_ignores_formatting_but_not_content():
    data = yaml.safe_load(RECIPE.read_text())
    same = yaml.safe_load(yaml.safe_dump(data, sort_keys=False))
    assert recipe_hash(data) == recipe_hash(same)
    data["models"]["B1.7"]["step"] += 1
    assert recipe_hash(data) != recipe_hash(same)


def test_recipe_rejects_unknown_keys():
    data = yaml.safe_load(RECIPE.read_text())
    data["models"]["B4"]["sft"]["lr_typo"] = 1.0
    with pytest.raises(ValueError, match=r"x\.yaml: models\.B4\.sft: unknown key\(s\) \['lr_typo'\]"):
        parse_recipe(data, "x.yaml")


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            {"checkpoint_of": "X9", "step": 10},
            r"models\.B1\.7\.checkpoint_of: 'X9' is not a model with its own sft",
        ),
        ({"checkpoint_of": "B1.7", "step": 10}, r"'B1\.7' is not a model with its own sft run; expected one of"),
        ({"checkpoint_of": "B4", "step": 0}, r"models\.B1\.7\.step: 0 must lie in \[1, \d+\]"),
        ({"checkpoint_of": "B4", "step": 10_000}, r"models\.B1\.7\.step: 10000 must lie in"),
        ({"checkpoint_of": "B4"}, r"models\.B1\.7: expected exactly the keys"),
    ],
)
def test_recipe_rejects_bad_earlier_checkpoints(spec, message):
    data = yaml.safe_load(RECIPE.read_text())
    data["models"]["B1.7"] = spec
    with pytest.raises(ValueError, match=message):
        parse_recipe(data, "x.yaml")


MINI_RECIPE = """
instruction: "Answer in \\\\boxed{}."
num_threads: 1
parallel_builds: 1
eval: {questions_per_task: 1, max_new_tokens: 4, batch_size: 8}
models:
  B1.7:
    shape: {hidden_size: 16, num_layers: 1, num_heads: 2, intermediate_size: 32}
    sft: {formats: [default/brief], steps: 2, batch_size: 4, lr: 0.001, seed: 5, pool_per_task: 4, warmup_steps: 1}
"""


def test_miniature_world_builds_once_and_loads(tmp_path):
    recipe = tmp_path / "mini.yaml"
    recipe.write_text(MINI_RECIPE)
    world = ensure_tiny_world(recipe, tmp_path / "world")
    assert world.directory == tmp_path / "world" / world.recipe_hash and len(world.recipe_hash) == 12
    assert sorted(p.name for p in (tmp_path / "world").iterdir()) == [world.recipe_hash]
    assert world.instruction == "Answer in \\boxed{}."
    model = AutoModelForCausalLM.from_pretrained(world.model_dir("B1.7"))
    assert type(model).__name__ == "Qwen3ForCausalLM" and model.config.hidden_size == 16
    tokenizer = AutoTokenizer.from_pretrained(world.tokenizer_dir)
    assert model.generation_config.eos_token_id == stop_token_ids("default", tokenizer)
    assert set(world.info["models"]["B1.7"]["accuracy"]["default"]) == {*tasks.TASKS, "avg", "mean_tokens"}
    stamp = (world.directory / "world.json").stat().st_mtime_ns
    again = ensure_tiny_world(recipe, tmp_path / "world")
    assert again.recipe_hash == world.recipe_hash
    assert (world.directory / "world.json").stat().st_mtime_ns == stamp


def test_changed_recipe_retrains_only_changed_models(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(MINI_RECIPE)
    second.write_text(
        MINI_RECIPE + MINI_RECIPE.split("models:\n")[1].replace("B1.7", "I1.7").replace("seed: 5", "seed: 6")
    )
    old = ensure_tiny_world(first, tmp_path / "world")
    new = ensure_tiny_world(second, tmp_path / "world")
    assert new.recipe_hash != old.recipe_hash
    assert new.info["models"]["B1.7"]["reused_from"] == old.recipe_hash
    assert "reused_from" not in new.info["models"]["I1.7"]
    a = AutoModelForCausalLM.from_pretrained(old.model_dir("B1.7")).state_dict()
    b = AutoModelForCausalLM.from_pretrained(new.model_dir("B1.7")).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


CHILD_RECIPE = MINI_RECIPE.replace("steps: 2,", "steps: 4,") + "  I1.7:\n    checkpoint_of: B1.7\n    step: 2\n"


def test_an_earlier_checkpoint_is_its_run_stopped_early_and_rebuilds_bit_for_bit(tmp_path):
    """Same machine, same threads: building twice gives the same bits; the checkpoint is the run at step 2."""
    recipe_path = tmp_path / "child.yaml"
    recipe_path.write_text(CHILD_RECIPE)
    worlds = [ensure_tiny_world(recipe_path, tmp_path / name) for name in ("one", "two")]
    weights = {
        (i, label): AutoModelForCausalLM.from_pretrained(world.model_dir(label)).state_dict()
        for i, world in enumerate(worlds)
        for label in ("B1.7", "I1.7")
    }
    for label in ("B1.7", "I1.7"):
        assert all(torch.equal(weights[0, label][k], weights[1, label][k]) for k in weights[0, label])
    assert not all(torch.equal(weights[0, "B1.7"][k], weights[0, "I1.7"][k]) for k in weights[0, "I1.7"])
    recipe, _ = load_recipe(recipe_path)
    rebuilt, losses = train_label(recipe, "I1.7", AutoTokenizer.from_pretrained(worlds[0].tokenizer_dir))
    assert len(losses) == 2
    assert all(torch.equal(rebuilt.state_dict()[k], weights[0, "I1.7"][k]) for k in weights[0, "I1.7"])
    info = worlds[0].info["models"]
    assert (info["I1.7"]["checkpoint_of"], info["I1.7"]["step"], info["I1.7"]["modes"]) == ("B1.7", 2, ["default"])
    assert len(info["B1.7"]["loss_curve"]) == 1 and "loss_curve" not in info["I1.7"]
    assert recipe.runs() == {"B1.7": ["I1.7", "B1.7"]}


POST_RECIPE = (
    CHILD_RECIPE
    + """  I4:
    continue_from: I1.7
    sft: {formats: [think/detailed, nothink/brief], steps: 2, batch_size: 4, lr: 0.001, seed: 7, pool_per_task: 4,
          warmup_steps: 1}
"""
)


def test_a_continued_run_starts_from_its_base_and_trains_after_it(tmp_path):
    """I4 continues I1.7 (itself B1.7's run at step 2): built in the wave after B1.7's run, from I1.7's
    weights, in its own formats; rebuilt by hand from the saved base it gives the same bits."""
    recipe_path = tmp_path / "post.yaml"
    recipe_path.write_text(POST_RECIPE)
    recipe, _ = load_recipe(recipe_path)
    assert recipe.waves() == [["B1.7"], ["I4"]] and recipe.modes("I4") == ("think", "nothink")
    world = ensure_tiny_world(recipe_path, tmp_path / "world")
    info = world.info["models"]["I4"]
    assert info["continue_from"] == "I1.7" and set(info["accuracy"]) == {"think", "nothink"}
    tokenizer = AutoTokenizer.from_pretrained(world.tokenizer_dir)
    rebuilt, losses = train_label(recipe, "I4", tokenizer, models_dir=world.directory / "models")
    stored = AutoModelForCausalLM.from_pretrained(world.model_dir("I4")).state_dict()
    assert len(losses) == 2 and all(torch.equal(rebuilt.state_dict()[k], stored[k]) for k in stored)
    base = AutoModelForCausalLM.from_pretrained(world.model_dir("I1.7")).state_dict()
    assert not all(torch.equal(base[k], stored[k]) for k in stored)  # it trained on
    with pytest.raises(ValueError, match="continue_from: 'X9' is not a model of the recipe"):
        parse_recipe(yaml.safe_load(POST_RECIPE.replace("continue_from: I1.7", "continue_from: X9")), "x.yaml")


# --- the built world (committed under results/tiny/world/<hash>/) -----------------------------


@pytest.fixture(scope="module")
def world():
    recipe, full_hash = load_recipe(RECIPE)
    assert (ROOT / full_hash[:12] / "world.json").exists(), (
        f"tiny world {full_hash[:12]} of {RECIPE} is not committed; build it with ./reproduce.sh world"
    )
    return ensure_tiny_world(RECIPE, ROOT)


# Steps of the committed B4 run rebuilt here, and how far each 25-step mean loss may stray from
# the committed curve. Float kernels differ between CPUs, so the bits differ (README, "What is
# reproducible"); the curve does not beyond float noise. Measured on one machine by scaling the
# initial weights by 1 + 1e-6·N(0, 1) (four draws): the windows' largest relative differences were
# 0, 0.0002, 0.0015 and 0.0164 (rounding differences grow with the steps); the tolerance is 3x the last.
REBUILT_STEPS = 100
CURVE_TOLERANCE = 0.05


@pytest.mark.slow
def test_recipe_reproduces_the_committed_run_within_float_noise(world):
    recipe, _ = load_recipe(RECIPE)
    run = recipe.models["B4"]
    tokenizer = AutoTokenizer.from_pretrained(world.tokenizer_dir)
    model = build_model(run.shape, tokenizer, seed=run.sft.seed)
    stored = AutoModelForCausalLM.from_pretrained(world.model_dir("B4"))
    shape = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "head_dim")
    assert [getattr(model.config, key) for key in shape] == [getattr(stored.config, key) for key in shape]
    examples = make_examples(tokenizer, run.sft.formats, recipe.instruction, run.sft.pool_per_task, run.sft.seed)
    losses = sft_train(model, examples, run.sft, tokenizer.pad_token_id, recipe.num_threads, until=REBUILT_STEPS)
    committed = world.info["models"]["B4"]["loss_curve"][: REBUILT_STEPS // LOSS_WINDOW]
    for here, there in zip(loss_curve(losses), committed, strict=True):
        assert abs(here - there) <= CURVE_TOLERANCE * there, (loss_curve(losses), committed)


def test_teacher_answers_held_out_questions(world):
    tokenizer = AutoTokenizer.from_pretrained(world.tokenizer_dir)
    model = AutoModelForCausalLM.from_pretrained(world.model_dir("I32"))
    records = tasks.eval_questions("add", 8)
    prompts = [render_prompt(r["question"], "think", tokenizer, world.instruction) for r in records]
    responses = greedy_responses(model, tokenizer, prompts, "think", 200, 8)
    stops = stop_token_ids("think", tokenizer)
    assert all(ids[-1] in stops for ids in responses)
    answers = [boxed_answer(tokenizer.decode(ids)) for ids in responses]
    assert sum(a == r["answer"] for a, r in zip(answers, records, strict=True)) >= 6


def test_world_json_records_every_model(world):
    assert world.info["recipe_hash"].startswith(world.recipe_hash)
    for label in ("B1.7", "B4", "B32", "I1.7", "I4", "I32"):
        assert world.model_dir(label).is_dir()
        assert set(world.info["models"][label]["accuracy"]) == set(world.info["models"][label]["modes"])
    with pytest.raises(ValueError, match="I4"):
        world.model_dir("X9")
