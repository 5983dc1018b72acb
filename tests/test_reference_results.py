"""The committed runs behind the README (results/reference/): every artefact built from them names them as the
project does, and every run is what its registration says (README's numbers are generated from them and checked
in tests/test_front_page.py)."""

from __future__ import annotations

import json
from pathlib import Path

from gropd.report import build

REPO = Path(__file__).resolve().parents[1]


def test_every_artefact_names_its_results_directory_as_the_project_does(tmp_path: Path, monkeypatch) -> None:
    """Built from the checkout's results/reference given by its absolute path (as reproduce.sh passes --results),
    no artefact holds the checkout's absolute path (meaningless on another machine): each names
    `results/reference/tiny/`, relative to the repository root it is built in."""
    from gropd.report import ARTEFACTS

    monkeypatch.chdir(REPO)
    written = build(
        list(ARTEFACTS),
        profile="tiny",
        results_root=REPO / "results" / "reference",
        experiments_dir=REPO / "experiments",
        out_root=tmp_path,
    )
    assert {path.name for path in written} >= {"claims.md", "table2.md", "figure1.md", "index.html", "figure1.png"}
    absolute = {str(REPO), str(REPO.resolve())}
    holding = [path.name for path in written if any(root.encode() in path.read_bytes() for root in absolute)]
    assert holding == []
    text = {path.name: path.read_text() for path in written if path.suffix in (".md", ".html", ".json")}
    for name in ("claims.md", "table2.md", "figure1.md"):
        assert "Built from `results/reference/tiny/`" in text[name], name
    assert "results read from <code>results/reference/tiny/</code>" in text["index.html"]
    assert '"results_root": "results/reference"' in text["claims.provenance.json"]


def test_the_second_constant_is_vanilla_opds_own_mean_feedback() -> None:
    """experiments/TINY.md, round 6: grid `baselines`' smaller c of each matched pairing is the mean over the logged
    steps of mean_abs_feedback in Table 1's committed OPD runs at seeds 0-2, to three significant digits."""
    import statistics

    from gropd.config.grids import expand_grid, load_grid

    entries = expand_grid(load_grid("baselines", REPO / "experiments"))
    chosen = {e.values["pairing"]: e.values["constant.c"] for e in entries if "constant.c" in e.values}
    assert set(chosen) == {"I4nothink-I1.7nothink", "B4-B1.7"}
    for pairing, c in chosen.items():
        runs = [f"table1__{pairing}__opd{tail}" for tail in ("", "__seed1", "__seed2")]
        values = [
            json.loads(line)["mean_abs_feedback"]
            for run in runs
            for line in (REPO / "results" / "native" / "tiny" / run / "metrics.jsonl").read_text().splitlines()
        ]
        assert len(values) == 300
        assert c == float(f"{statistics.fmean(values):.3g}"), (pairing, c, statistics.fmean(values))


def test_every_reference_run_is_remade_in_todays_portable_mode() -> None:
    """Round 8's remake (issue 51): every run round 7 published (results/round7) has its remade run under
    results/reference, Table 1 at seeds 0-4; each one finished or collapsed, made in every session in the portable
    mode as gropd/numerics.py pins it now (no MKL vector math) from a clean checkout of a recorded commit."""
    from gropd.config.grids import expand_grid, load_grid
    from gropd.numerics import MODES

    statuses = {
        path.parent.name: json.loads(path.read_text())
        for path in (REPO / "results" / "reference" / "tiny").glob("*/status.json")
    }
    round7 = {path.parent.name for path in (REPO / "results" / "round7" / "tiny").glob("*/status.json")}
    assert sorted(round7 - set(statuses)) == []
    table1 = {entry.run_id for entry in expand_grid(load_grid("table1", REPO / "experiments"), list(range(5)))}
    assert {run for run in statuses if run.startswith("table1__")} == table1
    for run, status in statuses.items():
        assert status["status"] in ("finished", "collapsed"), run
        assert [m["pinned"] for m in status["machines"]] == [MODES["portable"]] * len(status["machines"]), run
        assert {m["numerics"] for m in status["machines"]} == {"portable"}, run
        assert status["code"] and all(c["commit"] and c["clean"] for c in status["code"]), run
