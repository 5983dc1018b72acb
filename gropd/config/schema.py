"""The typed, frozen form of one run's configuration; unknown keys are rejected.

Cross-file checks (does the pairing exist, is the model pinned) live in
`gropd.config.resolve`, which knows the manifests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from eval.suites import HubSource
from eval.tiny_tasks import TASKS, check_task, train_pool_size
from gropd.credit import METHODS


class Strict(BaseModel):
    """Unknown keys refused; values of their own type (strict: no `true` for a count or a number, no 1 for a
    boolean, no number for a name); floats finite (inf and nan refused: validation only, model_dump unchanged)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


SEED_MAX = 2**32 - 1  # numpy's and torch's seeds are unsigned 32-bit
SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"  # one path component: no '/', never '.' or '..' (results/<profile>/<id>)
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
Beta = Annotated[float, Field(ge=0, lt=1)]


class OptimizerSettings(Strict):
    name: Literal["adamw"] = "adamw"
    lr: float = Field(gt=0)
    betas: Annotated[tuple[Beta, Beta], Field(strict=False)] = (0.9, 0.999)  # a YAML list is the tuple
    weight_decay: float = Field(ge=0, default=0.0)
    eps: float = Field(gt=0, default=1e-8)


class ScheduleSettings(Strict):
    """gropd/train/loop.py: warm-up over `warmup_steps` optimiser updates, then constant or a decay to
    min_lr_ratio."""

    name: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(ge=0, default=0)
    min_lr_ratio: float = Field(ge=0, le=1, default=0.0)


class TinyPrompts(Strict):
    """The tiny world's training pool (gropd/train/prompts.py): `per_task` questions of each of `tasks`."""

    kind: Literal["tiny"]
    per_task: int = Field(ge=1, default=1000)
    seed: Seed = 0
    tasks: list[str] | None = Field(default=None, min_length=1)

    @field_validator("tasks")
    @classmethod
    def _known_tasks(cls, tasks: list[str] | None) -> list[str] | None:
        for task in tasks or []:
            check_task(task)  # ValueError naming the valid ones
        return tasks

    @model_validator(mode="after")
    def _within_each_pool(self) -> TinyPrompts:
        """per_task questions of each task (every task without `tasks`) exist: checked here, not by a run that
        would fail, or draw forever, making its pool."""
        for task in self.tasks or TASKS:
            if self.per_task > (size := train_pool_size(task)):
                raise ValueError(f"per_task={self.per_task}, but task {task!r} has only {size} training questions")
        return self

    @field_validator("tasks")
    @classmethod
    def _each_task_once(cls, tasks: list[str] | None) -> list[str] | None:
        """A task named twice would put its questions in the pool twice: refused, as a suite named twice is."""
        repeated = sorted({name for name in tasks or [] if tasks.count(name) > 1})
        if repeated:
            raise ValueError(f"each task once (named more than once: {', '.join(repeated)})")
        return tasks


class PromptPool(Strict):
    """`source`: a TinyPrompts or a Hub record (eval.suites.HubSource), checked as one but kept as written (the
    config hash reads it as given)."""

    split: str = "train"  # read nowhere (a hub source names its own split: source.split); kept, always "train", as
    # every recorded config holds it in its hash
    source: dict[str, Any] = Field(default_factory=dict)

    @field_validator("split")
    @classmethod
    def _unsupported_split(cls, split: str) -> str:
        """Any split but "train" is refused: it would change the config hash and nothing else."""
        if split != "train":
            raise ValueError(
                "not supported: the key is read nowhere (only 'train' is accepted; a hub source's split is "
                "train.prompts.source.split)"
            )
        return split

    @field_validator("source")
    @classmethod
    def _known_source(cls, source: dict[str, Any]) -> dict[str, Any]:
        model = {"tiny": TinyPrompts, "hub": HubSource}.get(source.get("kind"))
        if model is None:
            raise ValueError(f"source.kind {source.get('kind')!r} is not a prompt source (expected tiny or hub)")
        try:
            model.model_validate(source)
        except ValidationError as err:
            first = err.errors()[0]
            if not first["loc"]:  # a check of the whole source (TinyPrompts._within_each_pool): its own words
                raise ValueError(f"source.{first['msg'].removeprefix('Value error, ')}") from None
            where = ".".join(["source", *map(str, first["loc"])])
            raise ValueError(
                f"{where}: {first['msg'].removeprefix('Value error, ')} (got {first.get('input')!r})"
            ) from None
        return source


MAX_STEPS = 10**6  # rollout batches a run may plan: the paper's runs take hundreds; 1e23 is a typo, not a plan


class TrainSettings(Strict):
    """Table 3 and the update's knobs. minibatch_responses = per_device_batch x grad_accum x replicas."""

    prompts_per_batch: int = Field(ge=1)
    group_size: int = Field(ge=1)
    per_device_batch: int = Field(ge=1)
    grad_accum: int = Field(ge=1)
    replicas: int = Field(ge=1)
    minibatch_responses: int = Field(ge=1)
    steps: int = Field(ge=1, le=MAX_STEPS)
    optimizer: OptimizerSettings
    schedule: ScheduleSettings = ScheduleSettings()
    max_grad_norm: float = Field(gt=0)
    clip_low: float = Field(gt=0, lt=1)
    clip_high: float = Field(gt=0)
    agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"] = "token-mean"
    checkpoint_every: int = Field(ge=1)
    keep_checkpoints: int = Field(ge=1, default=2)
    dump_steps: list[int] = Field(default_factory=list)  # rollout batches whose tensors are saved for inspection
    prompts: PromptPool = PromptPool()
    # Beyond the paper, off by default (gropd/config/resolve.py HASHED_WHEN_SET: at their defaults no run's hash
    # holds them). tis_cap: C of the truncated importance weight min(π_S,old / π_vllm, C) on each token's surrogate
    # (gropd/loss.py truncated_is_weights). dynamic_batch: update micro-steps packed by backend.max_tokens_per_forward
    # alone, per_device_batch no row cap (verl's dynamic batch size). balance_ranks: each minibatch's rows dealt to
    # the data-parallel ranks by tokens, longest first (verl's balance_batch; gropd/train/rank_balance.py).
    tis_cap: float | None = Field(default=None, gt=0)
    dynamic_batch: bool = False
    balance_ranks: bool = False

    @model_validator(mode="after")
    def _table3_arithmetic(self) -> TrainSettings:
        per_step = self.per_device_batch * self.grad_accum * self.replicas
        if per_step != self.minibatch_responses:
            raise ValueError(
                f"minibatch_responses={self.minibatch_responses} must equal per_device_batch x grad_accum x "
                f"replicas = {self.per_device_batch} x {self.grad_accum} x {self.replicas} = {per_step}"
            )
        if self.minibatch_responses % self.group_size:
            raise ValueError(
                f"minibatch_responses={self.minibatch_responses} must hold whole groups of group_size={self.group_size}"
            )
        rollout = self.prompts_per_batch * self.group_size
        if rollout % self.minibatch_responses:
            raise ValueError(
                f"a rollout batch of prompts_per_batch x group_size = {rollout} responses must split into whole "
                f"minibatches of minibatch_responses={self.minibatch_responses}"
            )
        return self


class SamplingBlock(Strict):
    temperature: float = Field(gt=0)
    top_p: float = Field(gt=0, le=1)
    max_new_tokens: int = Field(ge=1)


class GROPDSettings(Strict):
    """γ, λ, ε and the σ convention of A_i = ((S_i − μ) + λμ) / (σ + ε)."""

    gamma: float = Field(gt=0, le=1)
    lam: float = Field(ge=0)
    eps: float = Field(gt=0)
    std: Literal["unbiased", "population"] = "unbiased"
    sigma_floor: float = Field(ge=0)
    degenerate: Literal["zero", "keep"] = "zero"


class OPDSettings(Strict):
    """Vanilla OPD has no parameters: A_{i,t} = f_{i,t}."""


class ConstantSettings(Strict):
    """The constant control (beyond the paper): A_{i,t} = −c. `c` null: the mean |f| of the untrained
    student's first rollout batch, recorded in every metrics record as `constant_c`."""

    c: float | None = Field(default=None, gt=0)


class FeedbackSettings(Strict):
    """What the credit rules see of f. `zero_format_tokens`: f = 0 at each response's first token and at
    its stop token (the cross-pattern control: the teacher's verdict on the format, not the content)."""

    zero_format_tokens: bool = False


class CollapseRule(Strict):
    reward_window: int = Field(ge=1)
    reward_fraction: float = Field(ge=0, le=1)
    reward_patience: int = Field(ge=1)
    len_cap_fraction: float = Field(gt=0, le=1)
    len_cap_patience: int = Field(ge=1)


class EvalSettings(Strict):
    first_question: int = Field(default=0, ge=0)  # questions [first_question, first_question + questions) of each suite
    questions: int | None = Field(default=None, ge=1)
    batch_prompts: int = Field(ge=1)
    seed: Seed = 0
    suites: list[str] | None = Field(default=None, min_length=1)  # null: every suite of the profile
    k: dict[str, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)
    sampling: dict[Literal["default", "think", "nothink"], SamplingBlock]

    @field_validator("suites")
    @classmethod
    def _each_suite_once(cls, suites: list[str] | None) -> list[str] | None:
        """A suite named twice would be evaluated once under another config hash: refused."""
        repeated = sorted({name for name in suites or [] if suites.count(name) > 1})
        if repeated:
            raise ValueError(f"each suite once (named more than once: {', '.join(repeated)})")
        return suites


class PromptSettings(Strict):
    instruction: str


MAX_THREADS = 1024  # backend.threads: more than the hardware threads of the largest CPU node; 100000 is a typo that
# torch takes and OpenBLAS dies of (rc 139) once the run starts


class BackendSettings(Strict):
    """Engines, devices and precision. `dtype` is the compute dtype: the trained student keeps float32
    master weights and optimiser state whatever it is (bf16 autocast, or FSDP2's bf16 parameters for
    compute with float32 shards), and `final/` is saved in it (the dtype a user serves)."""

    rollout: Literal["hf", "vllm"]
    teacher: Literal["hf", "vllm", "server"]
    teacher_url: str | None = None  # http://host:port of `vllm serve`; not in the config hash (where, not what)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["float32", "bfloat16"] = "bfloat16"
    threads: int | None = Field(default=None, ge=1, le=MAX_THREADS)
    numerics: Literal["portable", "native"] = "native"  # CPU code paths (gropd/numerics.py); portable: pinned
    tensor_parallel: int = Field(ge=1, default=1)
    gradient_checkpointing: bool = False
    max_tokens_per_forward: int = Field(ge=1)  # packed tokens per forward (gropd/model/forward_batches.py)
    share_prompt_forward: bool = False  # a group's prompt forwarded once, its KV cache reused by its G responses
    old_logprobs: Literal["recompute", "sampler"] = "recompute"  # π_S,old: a trainer forward, or the sampler's own
    max_prompt_tokens: int = Field(ge=1, default=2048)  # vLLM engines: max_model_len = this + max_new_tokens
    rollout_gpu_fraction: float | None = Field(gt=0, le=1, default=0.3)  # vLLM gpu_memory_utilization of each engine
    teacher_gpu_fraction: float | None = Field(gt=0, le=1, default=0.3)  # null: fit.py's split of the job's card
    # (gropd/runs/preflight.py with_gpu_split; the paper profile's), a share typed anywhere overrides it
    eval_gpu_fraction: float = Field(gt=0, le=1, default=0.85)
    teacher_max_batched_tokens: int = Field(ge=1, default=4096)  # vLLM's prompt_logprobs workspace (V1 runner)


class TrackingSettings(Strict):
    """Experiment trackers (accelerate's): where curves go while a run trains. Not part of the
    config hash: watching a run does not change what it computes."""

    backends: list[Literal["tensorboard", "wandb"]] = Field(default_factory=lambda: ["tensorboard"])
    project: str = Field(default="gropd", pattern=SAFE_NAME)  # a folder of the run's tracking/: one path component
    wandb_mode: Literal["offline", "online"] = "offline"


class RunConfig(Strict):
    """One run, resolved from every layer. kind=train needs pairing+method; kind=eval needs model+mode;
    kind=score needs pairing and no method: the student's responses to train.steps rollout batches,
    scored under the teacher and graded, nothing updated (checked with the manifests in
    `gropd.config.resolve`)."""

    run_id: str = Field(pattern=SAFE_NAME)
    profile: str = Field(pattern=SAFE_NAME)
    kind: Literal["train", "eval", "score"] = "train"
    grid: str | None = Field(default=None, pattern=SAFE_NAME)
    seed: Seed = 0
    pairing: str | None = None
    method: str | None = None  # a name of gropd/credit.py's METHODS
    model: str | None = None
    mode: Literal["default", "think", "nothink"] | None = None
    train: TrainSettings
    sampling: SamplingBlock
    gropd: GROPDSettings
    opd: OPDSettings = OPDSettings()
    constant: ConstantSettings = ConstantSettings()
    feedback: FeedbackSettings = FeedbackSettings()
    collapse: CollapseRule
    eval: EvalSettings
    prompt: PromptSettings
    backend: BackendSettings
    tracking: TrackingSettings = TrackingSettings()

    @model_validator(mode="after")
    def _update_options_fit_the_method(self) -> RunConfig:
        """train.tis_cap weighs the trainer's π_S,old against the sampler's log-probs: refused where they are one
        (backend.old_logprobs: sampler) or where the loss has no sampled-token surrogate (method fullkl); nor does
        train.balance_ranks move fullkl's teacher states between ranks."""
        if self.train.tis_cap is not None and (self.backend.old_logprobs == "sampler" or self.method == "fullkl"):
            raise ValueError(
                f"train.tis_cap={self.train.tis_cap} needs backend.old_logprobs: recompute and a method with a "
                f"sampled-token surrogate (got old_logprobs {self.backend.old_logprobs!r}, method {self.method!r})"
            )
        if self.train.balance_ranks and self.method == "fullkl":
            raise ValueError("train.balance_ranks moves rows between ranks, and method fullkl's teacher states stay")
        return self

    @field_validator("method")
    @classmethod
    def _known_method(cls, name: str | None) -> str | None:
        if name is not None and name not in METHODS:
            raise ValueError(f"Input should be {', '.join(repr(m) for m in METHODS)} (got {name!r})")
        return name


def is_config_key(dotted: str) -> bool:
    """Whether `dotted` (e.g. "gropd.lam", "eval.k.add") names a key of RunConfig: each part a field of the section
    before it, any key below a free-form mapping (eval.k, train.prompts.source)."""
    model: Any = RunConfig
    for part in dotted.split("."):
        if model is None:
            return True  # inside a mapping the schema leaves open
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return False
        annotation = field.annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return True
