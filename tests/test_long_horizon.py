"""World 5 on the claims page (gropd/report/long_horizon.py): its registrations read strictly, the halfway length arm
of the instability rule, the pilot's claims 1, 4 and 5 and the cross-pattern pairing's claim 3 judged from runs written
in tmp_path, and each committed grid's rules dated before every committed run of it."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from report_fixtures import REPO, dump, evidence, macro_summary, metric_rows, seeded, write_experiments, write_run

from gropd.config.errors import ConfigError
from gropd.report.claims import claims
from gropd.report.evidence import Trend
from gropd.report.long_horizon import FILE, judge_long, load_long_registration, registration_files, side_by_side
from gropd.report.page import index
from gropd.report.verdicts import Thresholds, length_share, ratios, unstable

HALFWAY = Thresholds(
    lift_fraction=0.5, majority=0.5, reward_fall=0.5, length_near_cap=0.5, large_lambda=0.5, halfway=True
)
CAP = Thresholds(lift_fraction=0.5, majority=0.5, reward_fall=0.5, length_near_cap=0.5, large_lambda=0.5)


def trend(length, cap=432, errors=None):
    return Trend(length=length, reward=None, pearson=None, cap=cap, collapse_step=None, length_error=errors)


def test_the_halfway_arm_reads_the_room_left_below_the_cap():
    """World 5's untrained student writes ~330 of 432 tokens: the cap's arm calls any growth there unstable, the
    halfway arm only growth that takes up half the room left: (last − first) / (cap − first) ≥ 0.5."""
    slight, half, most = trend((330.0, 340.0)), trend((330.0, 381.0)), trend((330.0, 390.0))
    assert unstable(slight, CAP) == ["length 330.0 → 340.0 of cap 432"]  # 340 / 432 = 0.79
    assert unstable(slight, HALFWAY) == []  # 10 / 102 = 0.098
    assert unstable(half, HALFWAY) == ["length 330.0 → 381.0 of cap 432"]  # 51 / 102: exactly half
    assert unstable(most, HALFWAY) == ["length 330.0 → 390.0 of cap 432"]
    assert unstable(trend((390.0, 330.0)), HALFWAY) == []  # shrinking is no length arm
    assert length_share(most, HALFWAY)[1] == pytest.approx(60 / 102)


def test_the_halfway_ratios_standard_error_matches_a_numerical_derivative():
    """The delta method's error of (L1 − L0) / (cap − L0), against central differences of the same function."""
    first, last, cap, errors = 330.0, 380.0, 432, (4.0, 6.0)

    def share(a: float, b: float) -> float:
        return (b - a) / (cap - a)

    h = 1e-4
    d_first = (share(first + h, last) - share(first - h, last)) / (2 * h)
    d_last = (share(first, last + h) - share(first, last - h)) / (2 * h)
    expected = math.hypot(d_first * errors[0], d_last * errors[1])
    [(name, ratio, error, threshold)] = ratios(trend((first, last), errors=errors), HALFWAY)
    assert (name, threshold) == ("length growth / room to cap", 0.5)
    assert ratio == pytest.approx(50 / 102)
    assert error == pytest.approx(expected, rel=1e-6)


def test_a_bad_registration_names_the_file_and_key(tmp_path):
    exp = tmp_path / "experiments"
    exp.mkdir()
    path, data = exp / FILE, yaml.safe_load((REPO / "experiments" / FILE).read_text())
    dump(path, data | {"registered": {"commit": "93b3c97", "date": "2026-12-07T02:21:14"}})
    with pytest.raises(ConfigError, match=r"registration_long.yaml: registered: .*no time zone"):
        load_long_registration(path)
    dump(path, data | {"settings": {k: v for k, v in data["settings"].items() if k != "opd"}})
    with pytest.raises(ConfigError, match=r"rules.claim_1.*not in `settings`"):
        load_long_registration(path)
    dump(path, data | {"rules": data["rules"] | {"claim_2": "a claim World 5 has no rule function for"}})
    with pytest.raises(ConfigError, match=r"rules.claim_2.*one of 1, 3, 4, 5"):
        load_long_registration(path)
    dump(path, data | {"rules": {"long_horizon_question": "no claim"}})
    with pytest.raises(ConfigError, match=r"rules.*at least one claim_N"):
        load_long_registration(path)
    dump(path, {k: v for k, v in data.items() if k != "registered"})  # not yet dated: it loads, its runs read undated
    assert load_long_registration(path).registered is None
    path.unlink()
    assert registration_files(exp) == [] and judge_long(exp, tmp_path) == []  # no file: no grid, no section


def long_world(root: Path) -> Path:
    """experiments/ with the tiny-long profile at 10 steps (a finished run's metric rows), its suite, grid and
    registration (its runs under root/long/)."""
    exp = write_experiments(root)
    shutil.copy(REPO / "experiments" / "tiny_world_long.yaml", exp / "tiny_world_long.yaml")
    registration = yaml.safe_load((REPO / "experiments" / FILE).read_text())
    dump(exp / FILE, registration | {"results": "long"})  # root/long/tiny-long/: beside experiments/, as fixtures write
    shutil.copy(REPO / "experiments" / "grids" / "long_pilot.yaml", exp / "grids" / "long_pilot.yaml")
    profile = exp / "profiles" / "tiny-long.yaml"
    text = profile.read_text()
    assert "\n  steps: 100\n" in text
    profile.write_text(text.replace("\n  steps: 100\n", "\n  steps: 10\n", 1))
    suites = yaml.safe_load((exp / "suites.yaml").read_text())
    dump(exp / "suites.yaml", suites | {"tiny-long": {"chain": {"title": "chain", "k": 4, "paper_questions": None}}})
    return exp


def long_run(
    root: Path,
    run_id: str,
    started: str,
    macro: float,
    length: tuple[float, float] = (330.0, 330.0),
    collapse_step: int | None = None,
) -> None:
    """A world-5 run under root/long/tiny-long/ that began at `started`: finished, 10 steps whose length goes from
    length[0] (steps 1-9) to length[1] (step 10), with Macro `macro`; or collapsed at `collapse_step`."""
    fields = {"started": started}
    if collapse_step is not None:
        write_run(root / "long", "tiny-long", run_id, "collapsed", collapse_step=collapse_step, fields=fields)
        return
    rows = metric_rows(10, verifier_reward=0.3, mean_response_len=[length[0]] * 9 + [length[1]])
    summary = {"model": "m", "mode": "default", "suites": {"chain": macro_summary(macro)["suites"]["sub"]}}
    summary["suites"]["chain"]["mean_tokens"] = 330.0
    write_run(root / "long", "tiny-long", run_id, metrics=rows, eval_summary=summary, fields=fields)


def pilot_run(root: Path, setting: str, seed: int, macro: float, length: tuple[float, float]) -> None:
    """A finished run of the pilot's grid (started at 03:<seed> UTC, after its registration)."""
    long_run(root, seeded(f"long_pilot__B4-B1.7__{setting}", seed), f"2026-12-07T03:{seed:02d}:00+00:00", macro, length)


def test_claims_1_4_and_5_on_pilot_runs_by_the_registered_rules(tmp_path):
    """GR-OPD − OPD per seed 3, 4, 2 (mean 3, sd 1, t(2) interval 3 ± 4.303/√3 = [0.52, 5.48]: GR-OPD better);
    λ = 1.6 grows 330 → 390 (60 of 102 tokens of room: unstable) while λ = .25 and λ = 0 grow 330 → 340 (stable by
    the halfway arm, unstable by the cap's: claim 4 turns on the registered change); γ = 1 stable: claim 5 not
    reproduced."""
    exp = long_world(tmp_path)
    macros = {"opd": [30.0, 31.0, 32.0], "gropd-lam0.25-gamma0.99": [33.0, 35.0, 34.0]}
    lengths = {"gropd-lam1.6-gamma0.99": (330.0, 390.0)}
    for setting in ("opd", "gropd-lam0.25-gamma0.99", "fullkl", "gropd-lam0.25-gamma1", "gropd-lam1.6-gamma0.99",
                    "gropd-lam0.25-gamma0.9", "gropd-lam0-gamma0.99"):  # fmt: skip
        for seed in range(3):
            macro = macros.get(setting, [32.0] * 3)[seed]
            pilot_run(tmp_path, setting, seed, macro, lengths.get(setting, (330.0, 340.0)))
    [pilot] = judge_long(exp, tmp_path)
    verdicts = {c.key: c.verdict.outcome for c in pilot.claims}
    assert verdicts == {"1": "reproduced", "4": "reproduced", "5": "not reproduced"}
    one = pilot.claims[0]
    assert one.verdict.reason.startswith(
        "GR-OPD (gropd.lam=0.25, gropd.gamma=0.99) better (5.2 se from 0): +3.00 [+0.52, +5.48] (n=3)"
    )
    assert "GR-OPD (λ=0.25, γ=1) unstable in none of 3 seeds" in pilot.claims[2].verdict.reason
    intro, _, controls = one.section.tables[-1]  # described: fullkl 32 a seed − OPD's 30, 31, 32 and GR-OPD's 33-35
    assert intro.startswith("The control, described (judged by no claim)")
    assert [(row[0], row[1].text(), row[1].family) for row in controls] == [
        ("full-vocabulary KL, beyond the paper − vanilla OPD", "+1.00 [-1.48, +3.48] (n=3)", "described"),
        ("full-vocabulary KL, beyond the paper − GR-OPD (λ=0.25, γ=0.99)", "-2.00 [-4.48, +0.48] (n=3)", "described"),
    ]
    assert all(c.rules_before_runs.startswith("yes (93b3c97 at 2026-12-07 02:21:14 UTC") for c in pilot.claims)
    table = "\n".join(side_by_side(pilot, {}))
    assert (
        "| 1 | GR-OPD beats vanilla OPD in every pairing | — (n = —; — tokens) | reproduced (n = 3; 330 tokens)"
        in table
    )
    assert "world 4 —; world 5 +3.00 [+0.52, +5.48] (n=3)." in table


def test_a_run_started_before_the_registration_is_marked_set_after(tmp_path):
    exp = long_world(tmp_path)
    pilot_run(tmp_path, "opd", 0, 30.0, (330.0, 330.0))
    status = tmp_path / "long/tiny-long/long_pilot__B4-B1.7__opd/status.json"
    record = json.loads(status.read_text()) | {"started": "2026-12-07T02:00:00+00:00"}
    status.write_text(json.dumps(record))
    one = judge_long(exp, tmp_path)[0].claims[0]
    assert one.rules_before_runs.startswith("no: set after the runs: registration_long.yaml (93b3c97")


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the project's git history")
def test_each_committed_grids_rules_were_committed_before_each_of_its_runs_began():
    """Per registration file: its commit and date are git's and that commit wrote the file, and every committed run
    of its grid has a status.json `started` later (a grid with a committed run must be dated); the pilot has runs."""
    files = registration_files(REPO / "experiments")
    assert [path.name for path in files] == [FILE, "registration_long_cross.yaml"]
    counted = {}
    for path in files:
        reg = load_long_registration(path)
        runs = sorted((REPO / reg.results / reg.profile).glob(f"{reg.grid}__*/status.json"))
        tracked = set(git("ls-files", reg.results).splitlines())
        committed = counted[path.name] = [run for run in runs if str(run.relative_to(REPO)) in tracked]
        if reg.registered is None:
            assert not committed, f"{path.name} has committed runs but no `registered` commit"
            continue
        commit, date = git("log", "-1", "--format=%H %cI", reg.registered.commit).split()
        assert datetime.fromisoformat(date) == reg.registered.date
        assert f"experiments/{path.name}" in git("show", "--name-only", "--format=", commit).splitlines()
        for run in committed:
            assert datetime.fromisoformat(json.loads(run.read_text())["started"]) > reg.registered.date, run
    assert len(counted[FILE]) == 21, "the pilot's 21 runs"


def test_the_claims_page_and_its_html_page_show_world_5_beside_world_4(tmp_path):
    """claims.md ends with the World 5 section (anchor `world-5`, the table, each claim's evidence); index.html shows
    the table and links it; without a registration neither shows one."""
    long_world(tmp_path)
    pilot_run(tmp_path, "opd", 0, 30.0, (330.0, 330.0))
    artefact = claims(evidence(tmp_path))
    text = artefact.files["claims.md"]
    assert '<a id="world-5"></a>\n\n## World 5: the long horizon' in text
    assert '<a id="world-5-long_pilot"></a>\n\n### B4→B1.7 (grid `long_pilot`, registered in' in text
    assert "| 4 | Too much retained pressure (large λ) destabilises training | not tested (n = —; — tokens) |" in text
    assert "#### World 5, B4→B1.7, claim 5: An unrestricted horizon (γ = 1) destabilises training" in text
    assert "registration_long.yaml" in artefact.manifests
    html = index(evidence(tmp_path), [artefact]).files["index.html"]
    assert '<section id="world-5">' in html and 'href="claims.md#world-5-long_pilot"' in html
    (tmp_path / "experiments" / FILE).unlink()
    assert "World 5" not in claims(evidence(tmp_path)).files["claims.md"]


def cross_run(root: Path, setting: str, seed: int, macro: float, collapse_step: int | None = None) -> None:
    """A run of the cross-pattern grid (started at 13:<seed> UTC): finished (length 330 throughout), or collapsed."""
    run_id = seeded(f"long_cross__I4think-B1.7__{setting}", seed)
    long_run(root, run_id, f"2026-12-07T13:{seed:02d}:00+00:00", macro, collapse_step=collapse_step)


def test_the_cross_pattern_grid_reads_claim_3_beside_the_pilot(tmp_path):
    """Vanilla OPD collapsed in 3 of 3 seeds, GR-OPD (λ = 0) stable in 3 of 3: claim 3 reproduced on I4think→B1.7; γ = 1
    stable: claim 5 not reproduced. The page shows both pairings, the pilot first; a registration with no
    `registered` commit reads its runs as undated."""
    exp = long_world(tmp_path)
    cross = yaml.safe_load((REPO / "experiments" / "registration_long_cross.yaml").read_text())
    dump(exp / "registration_long_cross.yaml", cross | {"results": "long"})
    shutil.copy(REPO / "experiments" / "grids" / "long_cross.yaml", exp / "grids" / "long_cross.yaml")
    for seed in range(3):
        cross_run(tmp_path, "opd", seed, 0.0, collapse_step=8)
        for setting in ("gropd-lam0-gamma0.99", "fullkl", "gropd-lam0-gamma1", "gropd-lam0-gamma0.9"):
            cross_run(tmp_path, setting, seed, 25.0)
    pilot, second = judge_long(exp, tmp_path)
    assert (pilot.file, second.file, second.pairing_title) == (FILE, "registration_long_cross.yaml", "I4think→B1.7")
    verdicts = {c.key: c.verdict.outcome for c in second.claims}
    assert verdicts["3"] == "reproduced" and verdicts["5"] == "not reproduced"
    three = next(c for c in second.claims if c.key == "3")
    assert "vanilla OPD unstable in 3 of 3 seeds" in three.verdict.reason, three.verdict.reason
    assert all(c.rules_before_runs.startswith("yes (402903b at 2026-12-07 12:31:34 UTC") for c in second.claims)
    text = claims(evidence(tmp_path)).files["claims.md"]
    assert text.index('<a id="world-5-long_pilot">') < text.index('<a id="world-5-long_cross">')
    assert "#### World 5, I4think→B1.7, claim 3: Vanilla OPD collapses under mismatched thinking patterns" in text
    assert (  # the rule function that decides, beside the registered wording (report.yaml's, its instability arm aside)
        "**Rule applied** (the claims page's `unstable_vs_stable`, instability as registered): Per pairing: reproduced "
        "when vanilla OPD is unstable and GR-OPD (gropd.lam=0.0, gropd.gamma=0.99) stable." in text
    )
    del cross["registered"]
    dump(exp / "registration_long_cross.yaml", cross | {"results": "long"})
    undated = judge_long(exp, tmp_path)[1].claims[0].rules_before_runs
    assert undated == (
        "undated: registration_long_cross.yaml records no `registered` commit (first run 2026-12-07 13:00:00 UTC)"
    )
