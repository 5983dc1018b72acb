"""Tables 3–5 rendered from the manifests: training setting (train.yaml + profile), models
(models.yaml, full revisions from experiments/lock.yaml), suites (suites.yaml, plus the question
counts the evaluations actually used, read from results/<profile>/*/eval/summary.json)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gropd.config.layering import read_yaml
from gropd.record.run_dir import RunDir
from gropd.report.context import ReportContext
from gropd.report.formats import Table, plain
from gropd.report.provenance import publish_table

TABLE3 = (
    ("prompts_per_batch", "prompts per rollout batch"),
    ("group_size", "responses per prompt, G"),
    ("per_device_batch", "per-device train batch"),
    ("grad_accum", "gradient-accumulation steps"),
    ("replicas", "student data-parallel replicas"),
    ("minibatch_responses", "responses per optimisation minibatch"),
)
FULL_REVISION = re.compile(r"\b[0-9a-f]{40}\b")
UNPINNED = "unpinned — run ./reproduce.sh pin"


def optimiser_steps(train: dict[str, Any]) -> int:
    """Optimiser steps per rollout batch = prompts x G / responses per minibatch."""
    return train["prompts_per_batch"] * train["group_size"] // train["minibatch_responses"]


def build_table3(ctx: ReportContext) -> Table:
    """Table 3's six numbers (and the optimiser steps they imply) in this profile; the tiny profile
    also shows train.yaml's paper setting beside them."""
    ours = ctx.train_defaults()["train"]
    paper = read_yaml(ctx.experiments_dir / "train.yaml")["train"]
    extra = ctx.profile != "paper"
    rows = [plain([label, str(ours[key])] + ([str(paper[key])] if extra else [])) for key, label in TABLE3]
    rows.append(
        plain(
            ["optimiser steps per rollout batch", str(optimiser_steps(ours))]
            + ([str(optimiser_steps(paper))] if extra else [])
        )
    )
    header = ["quantity", f"{ctx.profile} profile"] + (["paper setting (train.yaml)"] if extra else [])
    caption = f"From experiments/train.yaml layered with experiments/profiles/{ctx.profile}.yaml."
    return Table(name="table3", title="Table 3: training setting", caption=caption, header=header, rows=rows)


def full_revision(lock_text: str | None, short: str) -> str:
    """The 40-digit id in the lock file that starts with the short revision, else the unpinned note."""
    if lock_text is None:
        return UNPINNED
    matches = sorted({rev for rev in FULL_REVISION.findall(lock_text) if rev.startswith(short)})
    return matches[0] if len(matches) == 1 else UNPINNED


def build_table4(ctx: ReportContext) -> Table:
    """Table 4: label, name, repo, short revision; the paper profile adds the pinned full revision."""
    lock_path = ctx.experiments_dir / "lock.yaml"
    lock_text = lock_path.read_text() if lock_path.exists() else None
    paper = ctx.profile == "paper"
    rows, missing = [], []
    if paper and lock_text is None:
        missing.append(f"{lock_path} absent: full revisions unpinned (run ./reproduce.sh pin)")
    for label, record in ctx.section("models").items():
        source = record.get("source") or {}
        if source.get("kind") == "hub":
            repo, revision = str(source.get("repo")), str(source.get("revision"))
        else:
            repo, revision = f"built by the suite ({source.get('kind')})", "—"
        row = [label, str(record.get("name", label)), repo, revision]
        if paper:
            row.append(full_revision(lock_text, revision) if source.get("kind") == "hub" else "—")
        rows.append(plain(row))
    header = ["label", "model", "repo", "revision"] + (["full revision (lock.yaml)"] if paper else [])
    caption = f"From experiments/models.yaml, section {ctx.profile}" + (
        "; full revisions from experiments/lock.yaml." if paper else "."
    )
    return Table(
        name="table4",
        title="Table 4: models",
        caption=caption,
        header=header,
        rows=rows,
        missing=missing,
        label_columns=len(header),
    )


def used_counts(ctx: ReportContext) -> dict[str, set[int]]:
    """Per suite, the question counts recorded by any evaluation summary of this profile."""
    counts: dict[str, set[int]] = {}
    for path in sorted(ctx.profile_results.glob("*/eval/summary.json")):
        for suite, record in ((RunDir(path.parents[1]).read_summary() or {}).get("suites") or {}).items():
            if isinstance(record, dict) and isinstance(record.get("questions"), int):
                counts.setdefault(suite, set()).add(record["questions"])
    return counts


def count_text(values: list[int]) -> str:
    """'1,042' for one count, '50, 500' for several, '—' for none."""
    return ", ".join(f"{v:,}" for v in values) if values else "—"


def build_table5(ctx: ReportContext) -> Table:
    """Table 5: suite, K, the paper's question count, the count used; a total row."""
    suites, used = ctx.section("suites"), used_counts(ctx)
    rows, missing = [], []
    for key, record in suites.items():
        paper_count = record.get("paper_questions")
        seen = sorted(used.get(key, set()))
        if not seen:
            missing.append(f"suite {key}: questions used unknown (no eval/summary.json under {ctx.profile_results})")
        rows.append(
            plain(
                [
                    str(record.get("title", key)),
                    str(record.get("k")),
                    count_text([paper_count] if paper_count is not None else []),
                    count_text(seen),
                ]
            )
        )
    paper_counts = [r.get("paper_questions") for r in suites.values()]
    paper_total = sum(paper_counts) if paper_counts and None not in paper_counts else None
    used_total = sum(max(used[k]) for k in suites) if suites and all(k in used for k in suites) else None
    rows.append(
        plain(
            [
                "Total",
                "",
                count_text([paper_total] if paper_total is not None else []),
                count_text([used_total] if used_total is not None else []),
            ]
        )
    )
    caption = (
        f"From experiments/suites.yaml, section {ctx.profile}; 'used' = the counts in this profile's "
        "evaluation summaries (total: the largest count per suite)."
    )
    return Table(
        name="table5",
        title="Table 5: evaluation suites",
        caption=caption,
        header=["suite", "K", "paper questions", "questions used"],
        rows=rows,
        missing=missing,
    )


def table3(ctx: ReportContext) -> list[Path]:
    return publish_table(ctx, build_table3(ctx), [], ["train.yaml", f"profiles/{ctx.profile}.yaml"])


def table4(ctx: ReportContext) -> list[Path]:
    return publish_table(ctx, build_table4(ctx), [], ["models.yaml", "lock.yaml"])


def table5(ctx: ReportContext) -> list[Path]:
    return publish_table(ctx, build_table5(ctx), [], ["suites.yaml"])
