"""Fingerprint every report artefact built from one results/ directory, to show a change left them alone.

    python tools/report_fingerprint.py --results DIR --profile tiny --out before.json
    (change the code)
    python tools/report_fingerprint.py --results DIR --profile tiny --compare before.json

Builds every artefact of `gropd.report` into a temporary folder and records the sha256 of each file; a
provenance sidecar is hashed without its "built" time and index.html without its stamp line (build time and
code version): what differs between two builds of the same results. --compare exits 1 and lists every file
that is new, gone or different."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

from gropd.report import ARTEFACTS, build
from gropd.report.page import unstamped


def artefact_bytes(path: Path) -> bytes:
    """The bytes compared: the file's; a provenance sidecar's JSON without "built"; index.html without its stamp."""
    if path.name == "index.html":
        return unstamped(path.read_text()).encode()
    if not path.name.endswith(".provenance.json"):
        return path.read_bytes()
    record = json.loads(path.read_text())
    record.pop("built", None)
    return json.dumps(record, sort_keys=True).encode()


def fingerprint(results: Path, profile: str, experiments: Path) -> dict[str, str]:
    """{artefact file name: sha256} of a fresh build of every artefact."""
    with tempfile.TemporaryDirectory() as out:
        written = build(
            list(ARTEFACTS), profile=profile, results_root=results, experiments_dir=experiments, out_root=Path(out)
        )
        return {path.name: hashlib.sha256(artefact_bytes(path)).hexdigest() for path in sorted(set(written))}


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per file that is new, gone or changed."""
    lines = [f"gone: {name}" for name in sorted(before.keys() - after.keys())]
    lines += [f"new: {name}" for name in sorted(after.keys() - before.keys())]
    lines += [f"changed: {name}" for name in sorted(before.keys() & after.keys()) if before[name] != after[name]]
    return lines


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    args.add_argument("--results", type=Path, default=Path("results"))
    args.add_argument("--profile", default="tiny")
    args.add_argument("--experiments", type=Path, default=Path("experiments"))
    action = args.add_mutually_exclusive_group(required=True)
    action.add_argument("--out", type=Path, help="write the fingerprint here")
    action.add_argument("--compare", type=Path, help="compare with a fingerprint written before")
    opts = args.parse_args(argv)
    prints = fingerprint(opts.results, opts.profile, opts.experiments)
    if opts.out:
        opts.out.write_text(json.dumps(prints, indent=2, sort_keys=True) + "\n")
        print(f"{len(prints)} artefact files fingerprinted into {opts.out}")
        return 0
    lines = differences(json.loads(opts.compare.read_text()), prints)
    print("\n".join(lines) if lines else f"all {len(prints)} artefact files identical")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
