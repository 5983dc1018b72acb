"""Which changed digit of the prose the prose test catches: one mutant per number.

    python tools/prose_mutations.py            (every section the prose test reads whole)
    python tools/prose_mutations.py --every 7  (each section's every 7th number only, from its first)

For every number that `tests/test_prose_numbers.py`'s NUMBER finds in a section of its SECTIONS that it reads whole
(TINY.md's round 7 and 8 sections; README's numbers are generated), the text is copied with that one number's last
digit d changed to (d + 1) mod 10 ("0.29" -> "0.20", "3 of 3" -> "4 of 3" and "3 of 4", "2%" -> "3%") and
everything else equal; the mutant is caught when any of the test's checks (CHECKS) finds something wrong with the
mutated text that it does not find with the committed one. The artefacts are built once (from the committed runs)
and every mutant read against them. Prints caught/total per section and each uncaught number with its file's line;
an uncaught number of a kind ACCEPTED names (with the reason no check reads it) is listed apart. Exits 1 when a
mutant is uncaught and of no such kind."""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("test_prose_numbers", REPO / "tests" / "test_prose_numbers.py")
prose = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prose)


ACCEPTED = [  # (what an uncaught number is; the words after it that say so; why no check reads it)
    (
        "the first number of a count",
        r" (?:of \d|collapse\b)",
        "a count of runs whose sentence names its subject, verb and pairing is counted from the claims page's"
        " per-seed rows; one whose subject or verb is left to the reader, or whose setting has no per-seed rows"
        " (rounds 5-6's native runs, the constant, Table 1's collapse column), is read word for word on an artefact"
        " line of its pairing, settings and subject, and the artefacts may state that count for another grid",
    ),
]


def accepted(text: str, at: int, token: str) -> str | None:
    """The kind of ACCEPTED the number `token` at `at` of `text` is, or None."""
    after = text[at + len(token) : at + len(token) + 12]
    return next((kind for kind, pattern, _ in ACCEPTED if re.match(pattern, after)), None)


Mutant = tuple[str, int, int, str, str, str | None, dict[str, str]]


def mutants(text: dict[str, str]) -> list[Mutant]:
    """(file, index of its section in SECTIONS, the number's line in the file, the number as stated, the words around
    it, the kind of ACCEPTED it is (None: none), the files' texts with it changed) for every number of
    each section read whole, but the numbers of its first line (the heading that bounds it)."""
    out = []
    for index, (name, _, every, section, first) in enumerate(prose.sections(text)):
        heading = section.index("\n")
        for match in prose.NUMBER.finditer(section) if every else ():
            if match.start() < heading:
                continue
            at = first + match.start()
            token = match.group(0)
            changed = text[name][:at] + prose.mutated(token) + text[name][at + len(token) :]
            context = " ".join(text[name][max(0, at - 60) : at + len(token) + 30].split())
            line = text[name].count("\n", 0, at) + 1
            out.append(
                (
                    name,
                    index,
                    line,
                    token,
                    context,
                    accepted(text[name], at, token),
                    {**text, name: changed},
                )
            )
    return out


def wrong(artefacts: dict, text: dict[str, str]) -> set[str]:
    """Everything the prose test's checks find wrong with `text` (file -> its text)."""
    return {finding for check in prose.CHECKS.values() for finding in check(artefacts, text)}


def run(
    artefacts: dict, every: int = 1, only: set[int] | None = None
) -> tuple[dict[int, tuple[int, int, int]], list[str], list[str]]:
    """(section index -> (caught, uncaught of ACCEPTED, mutants), each uncaught mutant of no kind of ACCEPTED,
    each uncaught one of ACCEPTED with its kind), over every `every`-th number of each section (of SECTIONS'
    indices `only`, when given); a mutant as 'file:line: number -> changed in …words…'."""
    text = prose.texts()
    before = wrong(artefacts, text)
    tally: dict[int, tuple[int, int, int]] = {}
    uncaught, excused = [], []
    counter: dict[int, int] = {}
    for name, index, line, token, context, kind, changed in mutants(text):
        counter[index] = counter.get(index, 0) + 1
        if (counter[index] - 1) % every or (only is not None and index not in only):
            continue
        caught = bool(wrong(artefacts, changed) - before)
        done, forgiven, total = tally.get(index, (0, 0, 0))
        tally[index] = (done + caught, forgiven + (not caught and kind is not None), total + 1)
        said = f"{name}:{line}: {token} -> {prose.mutated(token)} in '…{context}…'"
        if not caught:
            (uncaught if kind is None else excused).append(said if kind is None else f"{said} ({kind})")
    return tally, uncaught, excused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=int, default=1, help="mutate each section's every N-th number only")
    args = parser.parse_args(argv)
    if args.every < 1:
        print(f"--every: expected a positive integer, got {args.every}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as out:
        tally, uncaught, excused = run(prose.built(Path(out)), args.every)
    for index, (caught, forgiven, total) in sorted(tally.items()):
        name, start = prose.SECTIONS[index][:2]
        print(f"{name} {start!r}: {caught} of {total} mutants caught, {forgiven} uncaught of an accepted kind")
    print("\n".join(["uncaught:", *uncaught] if uncaught else ["every mutant caught or of an accepted kind"]))
    print("\n".join(["uncaught, of an accepted kind:", *excused, "the accepted kinds:"]))
    print("\n".join(f"- {kind}: {why}" for kind, _, why in ACCEPTED))
    return 1 if uncaught else 0


if __name__ == "__main__":
    sys.exit(main())
