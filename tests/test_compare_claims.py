"""tools/compare_claims.py: the claims two results directories judge differently, with both numbers, and the
registered comparisons resolved on one side only; the same runs on both sides differ in nothing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from report_fixtures import P1, REPO, scored, table1_grid, write_experiments

spec = importlib.util.spec_from_file_location("compare_claims", REPO / "tools" / "compare_claims.py")
compare_claims = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_claims)

T1 = "I4nothink→I1.7nothink"
COMPARISON = f"Macro, {T1}: GR-OPD (λ=0.25, γ=0.99) − vanilla OPD"


def world(root: Path, gropd: list[float]) -> Path:
    """Grid table1 on I4nothink→I1.7nothink alone at seeds 0-2: GR-OPD's Macro per seed as given, OPD's 10, 10, 10;
    no other grid (each other claim is not tested on either side)."""
    only = {"table1": table1_grid(P1, seeds=(0, 1, 2)), "lambda": None, "gamma": None, "table6": None}
    write_experiments(root, grids=only)
    scored(root, f"table1__{P1}__gropd", gropd)
    scored(root, f"table1__{P1}__opd", [10.0, 10.0, 10.0])
    return root


def test_a_cell_that_flips_is_named_with_both_numbers(tmp_path: Path, capsys) -> None:
    """Old: GR-OPD − OPD per seed 2, 1, 4: mean 2.33, std 1.528, half-width t(0.975, 2) 4.3027 x 1.528 / √3 = 3.79:
    [−1.46, +6.13], not resolved. New: 10, 11, 12: mean 11, std 1, half-width 2.48: [+8.52, +13.48], GR-OPD better.
    Claims 1 and 2 read that one cell (one registered comparison); claim 1 (its only cell) turns reproduced. The
    distances: 2.33 / (1.528 / √3) = 2.6 and 11 / (1 / √3) = 19.1 standard errors from 0; the old difference
    resolvable at 80% power (4.3027 + t(0.8, 2) 1.0607) x 0.882 = 4.73. After Holm over the registration's 28
    members (26 not run here: p 1), the new p 0.0027 x 28 = 0.077 is not resolved."""
    old, new = world(tmp_path / "old", [12.0, 11.0, 14.0]), world(tmp_path / "new", [20.0, 21.0, 22.0])
    code = compare_claims.main([str(old / "results"), str(new / "results"), "--experiments", str(old / "experiments")])
    out = capsys.readouterr().out.splitlines()
    before = (
        "not reproduced — no difference resolved at 3 seeds (2.6 se from 0; this design resolves ±4.73 at 80% power): "
        "+2.33 [-1.46, +6.13] (n=3)"
    )
    after = (
        "reproduced — GR-OPD better (19.1 se from 0): +11.00 [+8.52, +13.48] (n=3) (no pre-OPD evaluation of the "
        "student to set GR-OPD against)"
    )
    claim1 = out.index("claim 1. GR-OPD beats vanilla OPD in every pairing: not reproduced → reproduced")
    assert out[claim1 + 1] == f"  after Holm: stands → not reproduced: not resolved in {T1}"
    assert out[claim1 + 2] == f"  {T1}: {before} → {after}"
    assert f"  {T1}: {before} → {after}" in out[claim1 + 3 :]  # claim 2's cell, the same comparison
    assert out[-2:] == ["## Registered comparisons resolved on one side only", f"{COMPARISON}: +2.33 [-1.46, +6.13] "
                        "(n=3) → +11.00 [+8.52, +13.48] (n=3)"]  # fmt: skip
    assert code == 1


@pytest.mark.parametrize("new", [[12.0, 11.0, 14.0], [12.0, 11.0, 15.0]])
def test_numbers_that_move_under_the_same_verdicts_differ_in_nothing(tmp_path: Path, capsys, new) -> None:
    """The same runs, or GR-OPD's seed 2 at 15 (differences 2, 1, 5: +2.67 [−2.50, +7.84], still not resolved)."""
    old, changed = world(tmp_path / "old", [12.0, 11.0, 14.0]), world(tmp_path / "new", new)
    args = [str(old / "results"), str(changed / "results"), "--experiments", str(old / "experiments")]
    assert compare_claims.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "none" and out[-1] == "none" and len(out) == 5, out


def test_a_comparison_is_listed_only_where_one_side_resolves_it() -> None:
    """Absent, without an interval or not resolved are alike; resolved above 0, below 0 or not differ."""
    from gropd.report.claims import Claims
    from gropd.report.families import REGISTERED, Comparison, Families
    from gropd.report.stats import Interval

    def page(**intervals: Interval | None) -> Claims:
        made = [Comparison(("Macro", name, "b"), interval, REGISTERED) for name, interval in intervals.items()]
        return Claims([], "", Families.of(made, [(c.identity, None) for c in made]), "", ([], []))

    unresolved, above = Interval(1.0, -1.0, 3.0, 3, p=0.3), Interval(2.0, 1.0, 3.0, 3, p=0.01)
    old = page(a=None, c=unresolved, d=above, e=above)
    new = page(a=unresolved, b=unresolved, c=above, d=above)
    assert compare_claims.changed_calls(old, new) == [
        "Macro, c − b: +1.00 [-1.00, +3.00] (n=3) → +2.00 [+1.00, +3.00] (n=3)",
        "Macro, e − b: +2.00 [+1.00, +3.00] (n=3) → absent",
    ]
