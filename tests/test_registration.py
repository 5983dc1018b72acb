"""experiments/registration.yaml: each entry's commit and date are the history's; the claims page marks a rule in force
written after the runs it reads began ("set after the runs") and gives the verdict by the rule as first registered;
the registered seeds decide and the extra ones are shown apart; "no difference" has a size."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import datetime

import pytest
import yaml
from report_fixtures import P1, REPO, dump, evidence, macro_summary, scored, table1_grid, write_experiments, write_run

from gropd.report.claims import claims
from gropd.report.registration import load_registration
from gropd.report.stats import t_interval

T1 = "I4nothink→I1.7nothink"
BEFORE = "2026-12-06T01:00:00+00:00"  # the fixture runs' start: after the plan of table6's seeds 1–2


def test_every_registered_commit_and_date_is_the_historys() -> None:
    """Each version's commit exists in this checkout's history with the date written beside it (a shallow clone,
    which may lack it, skips; a commit missing from a full history fails)."""
    registration = load_registration(REPO / "experiments")
    versions = [v for history in registration.thresholds.values() for v in history]
    versions += [v for history in registration.tests.values() for v in history]
    versions += [*registration.readings, *registration.family, *registration.seeds, *registration.claims.values()]
    dates = {}
    for commit in {v.commit for v in versions}:
        found = subprocess.run(["git", "log", "-1", "--format=%cI", commit], cwd=REPO, capture_output=True, text=True)
        if found.returncode != 0:
            shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True)
            if shallow.stdout.strip() == b"true":
                pytest.skip(f"commit {commit} not in this shallow clone's history")
            pytest.fail(f"experiments/registration.yaml names commit {commit}, not in the history")
        dates[commit] = datetime.fromisoformat(found.stdout.strip())
    wrong = [(v.commit, v.date.isoformat(), dates[v.commit].isoformat()) for v in versions if v.date != dates[v.commit]]
    assert wrong == []


def distillation_world(root):
    """Pre-OPD student 9, 10, 11 and teacher 39, 40, 41 (three evaluations each); GR-OPD and vanilla OPD 25, 26, 27:
    lift 16 of the gap 30, share 0.53 (tests/test_report_claims.py); every run started at BEFORE."""
    table6 = {
        "kind": "eval",
        "seeds": [0, 1, 2],
        "include": [{"model": "I1.7", "mode": "nothink"}, {"model": "I4", "mode": "nothink"}],
    }
    write_experiments(root, grids={"lambda": None, "gamma": None, "table1": table1_grid(P1), "table6": table6})
    started = {"fields": {"started": BEFORE}}
    scored(root, "table6__I1.7-nothink", [9.0, 10.0, 11.0], **started)
    scored(root, "table6__I4-nothink", [39.0, 40.0, 41.0], **started)
    scored(root, f"table1__{P1}__gropd", [25.0, 26.0, 27.0], **started)
    scored(root, f"table1__{P1}__opd", [25.0, 26.0, 27.0], **started)
    return root


def test_a_threshold_changed_after_the_runs_is_marked_and_judged_as_first_registered(tmp_path) -> None:
    """A scratch copy of the registration with lift_fraction raised to 0.6 by a commit dated after the runs began:
    GR-OPD's share 0.53 no longer reaches it, so claim 0 reads not reproduced, marked 'set after the runs' with the
    threshold and its commit, and 'as first registered' (1/3, 52fbee0): reproduced."""
    root = distillation_world(tmp_path)
    path = root / "experiments" / "registration.yaml"
    registration = yaml.safe_load(path.read_text())
    registration["thresholds"]["lift_fraction"].append(
        {"value": 0.6, "commit": "abcdef1", "date": "2026-12-08T00:00:00+00:00"}
    )
    dump(path, registration)
    built = claims(evidence(root)).files
    page, summary = built["claims.md"], {c["claim"]: c for c in json.loads(built["claims.json"])}
    assert summary["0"]["verdict"] == "not reproduced"
    mark = "threshold lift_fraction = 0.6 (abcdef1, 2026-12-08 00:00 UTC)"
    assert mark in summary["0"]["set_after_the_runs"]
    assert summary["0"]["set_after_the_runs"].endswith("as first registered: reproduced")
    assert f"**Set after the runs:** {mark}" in page
    assert "By the rule as first registered: reproduced" in page
    # the same registration without the later version: nothing about the threshold is set after the runs
    shutil.copy(REPO / "experiments" / "registration.yaml", path)
    again = {c["claim"]: c for c in json.loads(claims(evidence(root)).files["claims.json"])}
    assert again["0"]["verdict"] == "reproduced" and "lift_fraction" not in again["0"]["set_after_the_runs"]


def test_registered_seeds_decide_and_extra_seeds_are_shown_apart(tmp_path) -> None:
    """Table 1 on I4nothink→I1.7nothink registered at seeds 0–1 by a plan dated before the runs and seeds 2–3 by one
    dated after: GR-OPD − OPD per seed 1, 2 at seeds 0–1 (mean 1.5, std 0.71, half-width 12.706 x 0.5 = 6.35: not
    resolved), 1, 2, 1, 2 at seeds 0–3 (mean 1.5, std 0.577, half-width 3.182 x 0.289 = 0.92: resolved). The
    registered seeds decide (not reproduced); all seeds read reproduced, shown apart."""
    root = tmp_path
    write_experiments(root, grids={"lambda": None, "gamma": None, "table6": None, "table1": table1_grid(P1)})
    path = root / "experiments" / "registration.yaml"
    registration = yaml.safe_load(path.read_text())
    plan = {"grid": "table1", "pairings": "matched", "commit": "abcdef1", "why": "test"}
    registration["seeds"] = [
        {**plan, "seeds": [0, 1], "date": "2026-12-01T00:00:00+00:00"},
        {**plan, "seeds": [2, 3], "date": "2026-12-06T02:00:00+00:00"},
    ]
    dump(path, registration)
    started = {"fields": {"started": BEFORE}}
    scored(root, f"table1__{P1}__gropd", [11.0, 12.0, 11.0, 12.0], **started)
    scored(root, f"table1__{P1}__opd", [10.0, 10.0, 10.0, 10.0], **started)
    built = claims(evidence(root)).files
    summary = {c["claim"]: c for c in json.loads(built["claims.json"])}
    assert (summary["1"]["verdict"], summary["1"]["verdict_all_seeds"]) == ("not reproduced", "reproduced")
    assert "**All seeds** (the extra seeds included): reproduced" in built["claims.md"]
    assert summary["1"]["anchor"] == "claims.md#claim-1" and summary["1"]["n"] == "2"


def test_the_size_of_no_difference_by_hand() -> None:
    """Paired differences 1, 2, 3, 4, 5: s = 1.5811, se = s/√5 = 0.70711, t(0.975, 4) = 2.7764 and t(0.8, 4) =
    0.9410 (tables): the smallest difference resolved at 80% power (2.7764 + 0.9410) x 0.70711 = 2.6286; the mean 3
    sits 3 / 0.70711 = 4.24 standard errors from 0."""
    interval = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert interval.resolvable() == pytest.approx(2.6286, abs=2e-4)
    assert interval.distance() == pytest.approx(4.2426, abs=1e-4)


def test_a_collapse_decided_cell_stays_in_the_family(tmp_path) -> None:
    """The registration fixes claim 1 at 5 members: with I4think→B1.7's OPD collapsed (a collapse decides the cell)
    and the other pairings not run, m stays the registered 28, the collapse a member resolved by its rule."""
    write_experiments(tmp_path, grids={"lambda": None, "gamma": None, "table6": None})
    started = {"fields": {"started": BEFORE}}
    scored(tmp_path, "table1__I4think-B1.7__gropd", [5.0, 6.0], **started)
    write_run(tmp_path / "results", "tiny", "table1__I4think-B1.7__opd", "collapsed", collapse_step=5, **started)
    write_run(tmp_path / "results", "tiny", "table1__I4think-B1.7__opd__seed1", "collapsed", collapse_step=5)
    page = claims(evidence(tmp_path)).files["claims.md"]
    assert "| claim | verdict | why | after Holm (m = 28) |" in page
    assert "| claim 1, I4think→B1.7 | 1 | decided by its rule without an interval: resolved | 0 (the rule's) |" in page
    assert macro_summary(1.0)  # (the fixture helper the other tests use)
