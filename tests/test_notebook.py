"""experiments/TINY.md, the lab notebook: every repository file it cites is in the repository, every link resolves,
and what it says of the committed runs (how many, on which machine) is what their status.json records. Its result
sections are history (each states the claims page as built when it was written); the current verdicts are README's
generated block and the claims page (tests/test_front_page.py)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "experiments" / "TINY.md"
TOP = ("benchmarks", "docs", "experiments", "fileio", "gropd", "tests", "tools", "results")  # eval/: runs' files
CITED = re.compile(rf"`((?:{'|'.join(TOP)})/[\w./-]+\.(?:py|yaml|md|json|sh|gz))`")  # a file, by its path
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_file_the_notebook_cites_is_in_the_repository() -> None:
    cited = set(CITED.findall(NOTEBOOK.read_text()))
    assert len(cited) > 10  # the pattern still reads the notebook's citations
    assert sorted(path for path in cited if not (REPO / path).exists()) == []


def test_every_link_of_the_notebook_resolves() -> None:
    """A link to a section (#round-8) needs its anchor; one to a file of the repository, the file (a link into
    paper_figures/ names what `./reproduce.sh report` writes, git-ignored: an artefact a report builds)."""
    text = NOTEBOOK.read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    wrong = []
    for target in LINK.findall(text):
        path, _, anchor = target.partition("#")
        if not path:
            wrong += [] if anchor in anchors else [target]
        elif path.startswith("../paper_figures/tiny/"):
            wrong += [] if re.fullmatch(r"(claims|table[1-6]|fig[34]|figure1)\.md", Path(path).name) else [target]
        elif not (NOTEBOOK.parent / path).exists():
            wrong.append(target)
    assert wrong == []


def test_what_the_notebook_says_of_the_committed_runs_is_their_record() -> None:
    """Round 8's count of the reference runs and the machine they name, counted from their status.json."""
    statuses = [json.loads(p.read_text()) for p in (REPO / "results" / "reference" / "tiny").glob("*/status.json")]
    machines = Counter(
        (m["cpu"]["vendor"], m["cpu"]["family"], m["cpu"]["model"]) for s in statuses for m in s["machines"]
    )
    ((vendor, family, model),) = machines
    text = " ".join(NOTEBOOK.read_text().split())
    assert vendor == "GenuineIntel"
    assert f"`results/reference/tiny` now holds {len(statuses)} runs" in text
    assert f"Intel Xeon (family {family} model {model}), each from a clean checkout" in text
