"""World 5's pilot on the claims page (gropd/report/long_horizon.py): its registration read strictly, the halfway
length arm of the instability rule, claims 1, 4 and 5 judged from pilot runs written in tmp_path, and the committed
pilot's rules dated before every committed pilot run."""

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
from gropd.report.long_horizon import FILE, judge_long, load_long_registration, side_by_side
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
    data = yaml.safe_load((REPO / "experiments" / FILE).read_text())
    dump(exp / FILE, {k: v for k, v in data.items() if k != "registered"})
    with pytest.raises(ConfigError, match=r"registration_long.yaml.*registered"):
        load_long_registration(exp)
    dump(exp / FILE, data | {"settings": {k: v for k, v in data["settings"].items() if k != "opd"}})
    with pytest.raises(ConfigError, match=r"rules.claim_1.*not in `settings`"):
        load_long_registration(exp)
    assert load_long_registration(tmp_path) is None  # no file: no pilot, no section


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


def pilot_run(root: Path, setting: str, seed: int, macro: float, length: tuple[float, float]) -> None:
    """A finished pilot run: 10 steps whose length goes from length[0] (steps 1-9) to length[1] (step 10)."""
    rows = metric_rows(10, verifier_reward=0.3, mean_response_len=[length[0]] * 9 + [length[1]])
    summary = {"model": "m", "mode": "default", "suites": {"chain": macro_summary(macro)["suites"]["sub"]}}
    summary["suites"]["chain"]["mean_tokens"] = 330.0
    started = {"started": f"2026-12-07T03:{seed:02d}:00+00:00"}
    run_id = seeded(f"long_pilot__B4-B1.7__{setting}", seed)
    write_run(root / "long", "tiny-long", run_id, metrics=rows, eval_summary=summary, fields=started)


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
    pilot = judge_long(exp, tmp_path)
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
    one = judge_long(exp, tmp_path).claims[0]
    assert one.rules_before_runs.startswith("no: set after the runs: registration_long.yaml (93b3c97")


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the project's git history")
def test_the_committed_pilots_rules_were_committed_before_each_of_its_runs_began():
    """The registration's commit and date are git's, the commit wrote the file, and every committed pilot run's
    status.json `started` is later."""
    reg = load_long_registration(REPO / "experiments")
    commit, date = git("log", "-1", "--format=%H %cI", reg.registered.commit).split()
    assert datetime.fromisoformat(date) == reg.registered.date
    assert f"experiments/{FILE}" in git("show", "--name-only", "--format=", commit).splitlines()
    runs = sorted((REPO / reg.results / reg.profile).glob(f"{reg.grid}__*/status.json"))
    tracked = set(git("ls-files", reg.results).splitlines())
    committed = [path for path in runs if str(path.relative_to(REPO)) in tracked]
    assert committed, "no committed pilot run"
    for path in committed:
        assert datetime.fromisoformat(json.loads(path.read_text())["started"]) > reg.registered.date, path


def test_the_claims_page_and_its_html_page_show_world_5_beside_world_4(tmp_path):
    """claims.md ends with the World 5 section (anchor `world-5`, the table, each claim's evidence); index.html shows
    the table and links it; without a registration neither shows one."""
    long_world(tmp_path)
    pilot_run(tmp_path, "opd", 0, 30.0, (330.0, 330.0))
    artefact = claims(evidence(tmp_path))
    text = artefact.files["claims.md"]
    assert '<a id="world-5"></a>\n\n## World 5: the long horizon' in text
    assert "| 4 | Too much retained pressure (large λ) destabilises training | not tested (n = —; — tokens) |" in text
    assert "### World 5, claim 5: An unrestricted horizon (γ = 1) destabilises training" in text
    assert "registration_long.yaml" in artefact.manifests
    html = index(evidence(tmp_path), [artefact]).files["index.html"]
    assert '<section id="world-5">' in html and 'href="claims.md#world-5"' in html
    (tmp_path / "experiments" / FILE).unlink()
    assert "World 5" not in claims(evidence(tmp_path)).files["claims.md"]
