"""Which changed digit of the prose the prose test catches: one mutant per number.

    python tools/prose_mutations.py            (every section the prose test reads whole)
    python tools/prose_mutations.py --every 7  (each section's every 7th number only, from its first)

For every number that `tests/test_prose_numbers.py`'s NUMBER finds in a section of its SECTIONS that it reads whole
(README's "What is reproduced so far", TINY.md's round 7 sections), the text is copied with that one number's last
digit d changed to (d + 1) mod 10 ("0.29" -> "0.20", "3 of 3" -> "4 of 3" and "3 of 4", "2%" -> "3%") and
everything else equal; the mutant is caught when any of the test's checks (CHECKS) finds something wrong with the
mutated text that it does not find with the committed one. The artefacts are built once (from the committed runs)
and every mutant read against them. Prints caught/total per section and each uncaught number with its file's line.
Exits 1 when a mutant is uncaught."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("test_prose_numbers", REPO / "tests" / "test_prose_numbers.py")
prose = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prose)


def mutated(token: str) -> str:
    """`token` with its last digit d changed to (d + 1) mod 10 (a percent sign kept)."""
    digits = token.rstrip("%")
    return digits[:-1] + str((int(digits[-1]) + 1) % 10) + token[len(digits) :]


def mutants(text: dict[str, str]) -> list[tuple[str, int, int, str, str, dict[str, str]]]:
    """(file, index of its section in SECTIONS, the number's line in the file, the number as stated, the words around
    it, the files' texts with it changed) for every number of each section read whole, but the numbers of its first
    line (the heading that bounds it)."""
    out = []
    for index, (name, _, every, section, first) in enumerate(prose.sections(text)):
        heading = section.index("\n")
        for match in prose.NUMBER.finditer(section) if every else ():
            if match.start() < heading:
                continue
            at = first + match.start()
            token = match.group(0)
            changed = text[name][:at] + mutated(token) + text[name][at + len(token) :]
            context = " ".join(text[name][max(0, at - 60) : at + len(token) + 30].split())
            out.append((name, index, text[name].count("\n", 0, at) + 1, token, context, {**text, name: changed}))
    return out


def wrong(artefacts: dict, text: dict[str, str]) -> set[str]:
    """Everything the prose test's checks find wrong with `text` (file -> its text)."""
    return {finding for check in prose.CHECKS.values() for finding in check(artefacts, text)}


def run(artefacts: dict, every: int = 1) -> tuple[dict[int, tuple[int, int]], list[str]]:
    """(section index -> (caught, mutants), each uncaught mutant as 'file:line: number -> changed in …words…') over
    every `every`-th number of each section."""
    text = prose.texts()
    before = wrong(artefacts, text)
    tally: dict[int, tuple[int, int]] = {}
    uncaught = []
    counter: dict[int, int] = {}
    for name, index, line, token, context, changed in mutants(text):
        counter[index] = counter.get(index, 0) + 1
        if (counter[index] - 1) % every:
            continue
        caught = bool(wrong(artefacts, changed) - before)
        done, total = tally.get(index, (0, 0))
        tally[index] = (done + caught, total + 1)
        if not caught:
            uncaught.append(f"{name}:{line}: {token} -> {mutated(token)} in '…{context}…'")
    return tally, uncaught


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=int, default=1, help="mutate each section's every N-th number only")
    args = parser.parse_args(argv)
    if args.every < 1:
        print(f"--every: expected a positive integer, got {args.every}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as out:
        tally, uncaught = run(prose.built(Path(out)), args.every)
    for index, (caught, total) in sorted(tally.items()):
        name, start = prose.SECTIONS[index][:2]
        print(f"{name} {start!r}: {caught} of {total} mutants caught")
    print("\n".join(["uncaught:", *uncaught] if uncaught else ["every mutant caught"]))
    return 1 if uncaught else 0


if __name__ == "__main__":
    sys.exit(main())
