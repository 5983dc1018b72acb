"""tools/prose_mutations.py over TINY.md's round 7 and 8 results (issue 52): a
changed digit of any number there fails the prose test, but the numbers of the kinds the tool accepts (ACCEPTED, each
with its reason)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("prose_mutations", REPO / "tools" / "prose_mutations.py")
prose_mutations = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prose_mutations)
prose = prose_mutations.prose
# the two sections issue 52's done-when names, and the remake's report
CHECKED = ("## What is reproduced so far", "### Round 7 results", "### Round 8 results")


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory) -> dict:
    return prose.built(tmp_path_factory.mktemp("figures"))


def test_every_changed_digit_is_caught_or_of_a_named_kind(artefacts) -> None:
    """Every number of the three sections mutated once (last digit + 1 mod 10), each read by the prose test's checks
    against artefacts built once from the committed runs: none passes unnoticed but the named kinds', and the
    mutants are as many as the sections' numbers (counted here by NUMBER, less each section's heading's)."""
    only = {i for i, section in enumerate(prose.SECTIONS) if section[1] in CHECKED}
    tally, uncaught, excused = prose_mutations.run(artefacts, only=only)
    assert uncaught == [], "a changed digit the prose test does not notice:\n" + "\n".join(uncaught)
    for index, (name, _, _, section, _) in enumerate(prose.sections(prose.texts())):
        if index not in only:
            continue
        body = section[section.index("\n") :]  # the heading that bounds it left out
        caught, forgiven, total = tally[index]
        assert total == len(prose.NUMBER.findall(body)) and 0 < caught <= total - forgiven, (name, tally[index])
    assert all(line.endswith(")") for line in excused)  # each names its kind


def test_a_changed_count_of_runs_or_pairing_bound_number_is_caught(artefacts) -> None:
    """The mutants are caught by reading, not by chance: a mutated copy of a sentence whose number the runs give
    ('152 in all') and one whose pairing binds it ('0.850 ± 0.052 on I4nothink') each fail a check, the committed
    text none."""
    text = prose.texts()
    assert prose_mutations.wrong(artefacts, text) == set()
    for words in ("152 in all", "0.850 ± 0.052 on I4nothink"):
        name = next(n for n in text if words in text[n])
        at = text[name].index(words)
        changed = {
            **text,
            name: text[name][:at] + prose.mutated(words.split()[0]) + text[name][at + len(words.split()[0]) :],
        }
        assert prose_mutations.wrong(artefacts, changed), words
