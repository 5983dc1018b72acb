"""The claims page's comparisons in two families (docs/DESIGN.md §7): *registered*, the differences a verdict rule
reads, Holm–Bonferroni adjusted over the family experiments/registration.yaml fixes (a cell a collapse decides
stays a member with its rule's outcome); *described*, the differences shown beside a verdict that no rule reads,
counted, not adjusted.
The same two settings compared in the same number under two claims (claims 1 and 2) are one comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gropd.report.stats import CONFIDENCE, Interval, holm

REGISTERED, DESCRIBED = "registered", "described"
ALPHA = round(1 - CONFIDENCE, 10)  # the level a Holm-adjusted p is held to: the intervals' own


@dataclass(frozen=True)
class Comparison:
    """One difference a claim shows: what it compares (`identity`: the number and the two sides), its interval
    (None: no seed to compare) and its family."""

    identity: tuple[str, ...]
    interval: Interval | None
    family: str

    def text(self, decimals: int = 2) -> str:
        return "—" if self.interval is None else self.interval.text(decimals)

    @property
    def name(self) -> str:
        """'Macro, B4→B1.7: GR-OPD (λ=0.25, γ=0.99) − vanilla OPD': the number, then a − b (b's pairing left out
        where it is a's)."""
        measure, a, b = self.identity
        pairing = a.split(": ", 1)[0] + ": "
        return f"{measure}, {a} − {b.removeprefix(pairing) if a.startswith(pairing) else b}"


@dataclass(frozen=True)
class Families:
    """The comparisons of a page by family, each identity once, and the Holm-adjusted p of the family's members
    (experiments/registration.yaml fixes them: m does not move with outcomes)."""

    registered: dict[tuple[str, ...], Comparison]
    described: dict[tuple[str, ...], Comparison]
    adjusted: dict[tuple[str, ...], float]

    @staticmethod
    def of(comparisons: list[Comparison], members: list[tuple[tuple[str, ...], float | None]]) -> Families:
        """The families of `comparisons`, in the order given (one registered anywhere is registered), Holm over
        `members`: the family fixed in advance (experiments/registration.yaml), each an identity with its p (a
        comparison's; a cell its rule decides without one: 0 when it is resolved, 1 when not; None: the
        comparison's own p)."""
        registered = {c.identity: c for c in comparisons if c.family == REGISTERED}
        counted = set(registered) | {reverse(i) for i in registered}  # a − b and b − a are one comparison
        described = {c.identity: c for c in comparisons if c.family == DESCRIBED and c.identity not in counted}
        shown = {c.identity: c for c in comparisons}
        ps = [p if p is not None else (shown[i].interval.p if shown[i].interval else None) for i, p in members]
        ps = [1.0 if p is None else p for p in ps]  # (an infinite interval, one seed a side, resolves nothing)
        adjusted = dict(zip((i for i, _ in members), holm(ps), strict=True)) if members else {}
        return Families(registered, described, adjusted)

    @property
    def m(self) -> int:
        """How many members the registered family holds (fixed by the registration)."""
        return len(self.adjusted)

    @property
    def k(self) -> int:
        """How many described comparisons the page shows with a p."""
        return sum(c.interval is not None and c.interval.p is not None for c in self.described.values())

    def p(self, comparison: Comparison) -> str:
        """The comparison's p ('—' without one)."""
        interval = comparison.interval
        return "—" if interval is None or interval.p is None else pvalue(interval.p)

    def adjusted_p(self, comparison: Comparison) -> float | None:
        """Its Holm-adjusted p, as a − b or as b − a (None: outside the registered family)."""
        found = self.adjusted.get(comparison.identity)
        return self.adjusted.get(reverse(comparison.identity)) if found is None else found

    def family(self, comparison: Comparison) -> str:
        """REGISTERED where the comparison, or its reverse (b − a), is registered; else its own family."""
        identities = (comparison.identity, reverse(comparison.identity))
        return REGISTERED if any(i in self.registered for i in identities) else comparison.family

    def holm(self, comparison: Comparison) -> str:
        """Its Holm-adjusted p ('—' outside the registered family or without a p)."""
        adjusted = self.adjusted_p(comparison)
        return "—" if adjusted is None else pvalue(adjusted)

    def p_text(self, comparison: Comparison) -> str:
        """'p 0.012, Holm 0.31': the comparison's p and, registered, its adjusted p; '—' without a p."""
        if (p := self.p(comparison)) == "—":
            return p
        return f"p {p}" + ("" if (adjusted := self.holm(comparison)) == "—" else f", Holm {adjusted}")

    def after_holm(self, comparison: Comparison) -> str:
        """'resolved' (adjusted p < ALPHA: the difference's sign stands after the adjustment), 'not resolved', or '—'
        (not in the registered family)."""
        adjusted = self.adjusted_p(comparison)
        return "—" if adjusted is None else "resolved" if adjusted < ALPHA else "not resolved"


def reverse(identity: tuple[str, ...]) -> tuple[str, ...]:
    """The identity of b − a for a − b's (measure, a, b)."""
    measure, a, b = identity
    return (measure, b, a)


def pvalue(p: float) -> str:
    """A p-value in two significant digits, '< 0.0001' below that."""
    return "< 0.0001" if p < 1e-4 else f"{p:.2g}"


def expand(header: list[str], rows: list[list[Any]], families: Families) -> tuple[list[str], list[list[str]]]:
    """A section's table as shown: each column of Comparisons followed by the comparison's family and its p (with
    Holm's adjustment where registered)."""
    header, rows = list(header), [list(row) for row in rows]
    for i in sorted({i for row in rows for i, cell in enumerate(row) if isinstance(cell, Comparison)}, reverse=True):
        header[i + 1 : i + 1] = ["family", f"p; Holm-adjusted p (registered, m = {families.m})"]
        for row in rows:
            cell = row[i]
            shown = (
                [cell.text(), families.family(cell), families.p_text(cell)] if isinstance(cell, Comparison) else None
            )
            row[i : i + 1] = shown or [cell, "—", "—"]
    return header, rows
