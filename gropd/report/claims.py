"""The claims page: each headline claim of the paper (docs/DESIGN.md §1–2), the evidence this profile's runs
give, and a verdict by the rules of gropd/report/verdicts.py. Reads results/ only (grids table1,
table6, lambda, gamma); writes claims.md and claims.provenance.json.
"""

from __future__ import annotations

from pathlib import Path

from eval.files import atomic_write_text
from gropd.report.claim_dynamics import collapse_section, gamma_section, lambda_section, pressure_sections
from gropd.report.claim_page import Section, verdict_line
from gropd.report.claim_scores import beats_section, distillation_section, gains_section
from gropd.report.context import ReportContext
from gropd.report.formats import pipe_table, plain
from gropd.report.provenance import write_provenance
from gropd.report.verdicts import RULES


def build_sections(ctx: ReportContext) -> list[Section]:
    """Every section of the page, in order: 0 (distillation works), then claims 1–6b."""
    return [
        distillation_section(ctx),
        beats_section(ctx),
        gains_section(ctx),
        collapse_section(ctx),
        lambda_section(ctx),
        gamma_section(ctx),
        *pressure_sections(ctx),
    ]


def render(ctx: ReportContext, sections: list[Section]) -> str:
    """The Markdown page: a header, a summary table of verdicts, then one part per claim."""
    lines = [
        f"# The paper's claims on the {ctx.profile} profile",
        "",
        f"Built from `{ctx.profile_results}/` alone (reports never train). Every number below comes from a "
        "run named under it; the paper's numbers are quoted and labelled as the paper's. A verdict is "
        "**reproduced**, **not reproduced** (with the reason) or **not tested** (with the runs that would "
        "test it); each claim states its rule, and the thresholds are named values in "
        "`gropd/report/verdicts.py`.",
        "",
        f"**Every rule.** {RULES['noise']}",
        "",
    ]
    lines += pipe_table(
        ["claim", "verdict", "why (missing runs: in the claim's section)"],
        [plain([f"{s.key}. {s.title}", s.verdict.outcome, s.verdict.reason]) for s in sections],
    )
    for s in sections:
        lines += ["", f"## {s.key}. {s.title}", "", f"**Claim.** {s.paper}", "", f"**Rule.** {s.rule}", ""]
        lines += ["**Evidence.**", ""] + s.evidence + ["", verdict_line(s.verdict), ""]
        lines += ["**Missing:** none"] if not s.missing else ["**Missing:**"] + [f"- {m}" for m in s.missing]
    return "\n".join(lines) + "\n"


def claims(ctx: ReportContext) -> list[Path]:
    """Write claims.md and its provenance sidecar (every run read, every missing run)."""
    sections = build_sections(ctx)
    path = ctx.out_dir / "claims.md"
    atomic_write_text(path, render(ctx, sections))
    runs = list({run.run_id: run for s in sections for run in s.runs}.values())
    missing = list(dict.fromkeys(m for s in sections for m in s.missing))
    manifests = ctx.manifest_files(
        "grids/table1.yaml",
        "grids/table6.yaml",
        "grids/lambda.yaml",
        "grids/gamma.yaml",
        "pairings.yaml",
        "suites.yaml",
        "train.yaml",
        "report.yaml",
    )
    return [path, write_provenance(ctx, "claims", runs=runs, manifests=manifests, outputs=[path], missing=missing)]
