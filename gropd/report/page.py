"""index.html: one self-contained page of a build for a reviewer. At the top the profile, the results directory,
the build date and code version, and the claims table (claim, verdict, why), each claim linking to its section;
then Figures 1, 3 and 4 as inline SVG; Tables 1–6 (the paper's numbers in their labelled reference columns, where
shown), each linking to its CSV and LaTeX; a section per claim (the paper's sentence, the rule, the evidence, the
figures drawn from the grids it reads, the verdict, the Missing runs); every run read (state, config hash, seed)
and what was missing.

The page only formats: every number and word comes from the artefacts of its build (the Table, Drawing and Claims
their Markdown, LaTeX and CSV render), so it shows exactly the artefacts of its build, and names them (a target
builds its own artefacts and the page of those; `all` builds every one). It loads nothing (styles inline, no
script, no URL), opens from disk and prints to PDF. Text from files is escaped.
"""

from __future__ import annotations

import html
import importlib.metadata
import re
from datetime import UTC, datetime
from pathlib import Path

from gropd.numerics import describe
from gropd.record.code import code_record, short
from gropd.report.claims import REGISTERED_COLUMNS, SUMMARY, Claims, Judged, Registered
from gropd.report.evidence import Evidence
from gropd.report.figures import DRAWS, Drawing
from gropd.report.formats import Cell, Table, missing_block
from gropd.report.long_horizon import both_worlds, horizon_question, pilot_heading
from gropd.report.publish import Artefact
from gropd.report.stats import CONVENTION, UNPAIRED

STAMP = re.compile(r'<p class="stamp">.*?</p>\n')  # the build date and code version: two builds differ only here
STYLE = """
body { font: 15px/1.45 system-ui, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #1a1a1a;
  max-width: 1200px; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.6rem; margin-bottom: 0.3rem; }
h2 { border-bottom: 2px solid #ccc; margin-top: 2.5rem; }
h3 { margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #d0d0d0; padding: 0.2rem 0.45rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.wide { overflow-x: auto; }
.reproduced { color: #11632d; font-weight: 600; }
.not-reproduced { color: #a31515; font-weight: 600; }
.not-tested { color: #5c5c5c; font-weight: 600; }
figure { margin: 1rem 0; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption, .missing, .files, .stamp, .meta { font-size: 0.85rem; color: #444; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.9em; background: #f4f4f4; }
nav a { margin-right: 1rem; }
@page { size: A4; margin: 12mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 9pt; }
  nav, .files { display: none; }
  .wide { overflow: visible; }
  table { font-size: 7pt; }
  figure, tr { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""


GLOSSARY = "../../docs/glossary.md"  # from paper_figures/<profile>/, where the page is published


def esc(value: object) -> str:
    return html.escape(str(value))


def inline(text: str) -> str:
    """Escaped text, with the Markdown the artefacts write inline (`code`, **bold**) as HTML."""
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", esc(text))
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)


def verdict_class(outcome: str) -> str:
    return outcome.replace(" ", "-")


def grid(header: list[str], rows: list[list[Cell]], labels: int) -> str:
    """An HTML table: the columns from `labels` on right-aligned (numbers), bold cells in <strong>."""

    def cell(tag: str, c: Cell, column: int) -> str:
        text = esc(c.text)
        body = f"<strong>{text}</strong>" if c.bold and text else text
        align = ' class="num"' if column >= labels else ""
        return f"<{tag}{align}>{body}</{tag}>"

    head = "".join(cell("th", Cell(title), i) for i, title in enumerate(header))
    body = "".join("<tr>" + "".join(cell("td", c, i) for i, c in enumerate(row)) + "</tr>\n" for row in rows)
    return f'<div class="wide"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table></div>\n'


def missing_html(lines: list[str]) -> str:
    """The Missing block every artefact ends with (formats.missing_block), in HTML."""
    head, *items = missing_block(lines)
    listed = "".join(f"<li>{inline(item.removeprefix('- '))}</li>\n" for item in items)
    return f'<div class="missing"><p>{inline(head)}</p>' + (f"<ul>\n{listed}</ul>" if listed else "") + "</div>\n"


def anchors(names: list[str]) -> str:
    return " · ".join(f'<a href="{esc(name)}">{esc(name)}</a>' for name in names)


def links(names: list[str], label: str = "Files") -> str:
    return f'<p class="files">{esc(label)}: {anchors(names)}</p>\n'


def own_files(artefact: Artefact) -> list[str]:
    return [*artefact.files, f"{artefact.name}.provenance.json"]


def inline_svg(document: str, prefix: str, label: str) -> str:
    """An SVG document as an element of the page: no XML prolog, every id (and reference to one) prefixed so that
    two copies on one page do not clash, labelled for screen readers."""
    body = document[document.index("<svg") :]
    body = re.sub(r'\bid="', f'id="{prefix}', body).replace('href="#', f'href="#{prefix}')
    body = body.replace("url(#", f"url(#{prefix}")
    return body.replace("<svg ", f'<svg role="img" aria-label="{esc(label)}" ', 1)


def figure(artefact: Artefact, stem: str) -> str:
    """One figure of a figure artefact inline (id `figure-<stem>`, which claims link to), with links to its PNG and
    PDF."""
    drawing: Drawing = artefact.content
    files = [name for name in artefact.files if name.rsplit(".", 1)[0] == stem]
    svg = inline_svg(drawing.svgs[stem], f"{stem}-", f"{stem}: {drawing.title}")
    return f'<figure id="figure-{esc(stem)}">\n{svg}\n<figcaption>{esc(stem)}: {anchors(files)}</figcaption></figure>\n'


def section(ident: str, heading: str, body: str, level: int = 3) -> str:
    return f'<section id="{esc(ident)}">\n<h{level}>{esc(heading)}</h{level}>\n{body}</section>\n'


def bullets(lines: list[str]) -> str:
    return "<ul>\n" + "".join(f"<li>{inline(line)}</li>\n" for line in lines) + "</ul>\n" if lines else ""


def claims_table(artefact: Artefact) -> str:
    """The claims table (claim, verdict, why; each claim linking to its section), and the wording of every rule."""
    claims: Claims = artefact.content
    rows = []
    for i, j in enumerate(claims.judged):
        outcome = f'<td class="{verdict_class(j.verdict.outcome)}">{esc(j.verdict.outcome)}</td>'
        reason, holm = f"<td>{inline(j.verdict.reason)}</td>", f"<td>{inline(j.after_holm)}</td>"
        registered = claims.registered.get(j.claim.key)
        extra = "".join(f"<td>{inline(cell)}</td>" for cell in (registered.columns() if registered else []))
        rows.append(f'<tr><td><a href="#claim-{i}">{esc(j.name)}</a></td>{outcome}{reason}{holm}{extra}')
    titles = [*SUMMARY, f"after Holm (m = {claims.families.m})"] + (REGISTERED_COLUMNS if claims.registered else [])
    head = "<thead><tr>" + "".join(f"<th>{esc(t)}</th>" for t in titles) + "</tr></thead>\n<tbody>\n"
    table = f'<div class="wide"><table>\n{head}' + "</tr>\n".join(rows) + "</tr>\n</tbody>\n</table></div>\n"
    body = table + f"<p><strong>Comparisons.</strong> {inline(claims.multiplicity)}</p>\n"
    header, rows = claims.family_table
    body += "<p><strong>The registered family.</strong></p>\n" + grid(header, [Cell.texts(*row) for row in rows], 2)
    body += f"<p><strong>Every rule.</strong> {inline(claims.common)}</p>\n" + links(own_files(artefact))
    return section("claims", "The paper's claims", body, level=2) + long_horizon_section(claims)


def long_horizon_section(claims: Claims) -> str:
    """World 5 beside this page's world (long_horizon.both_worlds), a table per registered pairing, each linking the
    claims page's section ('' without a registered grid)."""
    body = ""
    for pilot, world4 in claims.long:
        keys = ", ".join(c.key for c in pilot.claims)
        intro = (
            f"{esc(pilot_heading(pilot))}: claims {keys} on the long-horizon twin (runs read from "
            f"<code>{esc(pilot.results)}/</code>), by the rules registered before its runs. Evidence: "
            f'<a href="claims.md#world-5-{esc(pilot.registration.grid)}">claims.md, World 5</a>.'
        )
        header, rows = both_worlds(pilot, world4)
        body += f"<p>{intro}</p>\n" + grid(header, rows, labels=len(header))
        question = horizon_question(pilot, world4)
        body += f"<p>{inline(question)}</p>\n" if question else ""
    return section("world-5", "World 5: the long horizon", body, level=2) if body else ""


def claim_section(index: int, j: Judged, drawings: list[Artefact], registered: Registered | None = None) -> str:
    """One claim: the paper's sentence, the rule, the evidence, the figures of the page drawn from the grids it
    reads, the verdict and the Missing runs."""
    body = (
        f"<p><strong>The paper.</strong> {inline(j.claim.paper)}</p>\n<p><strong>Rule.</strong> {inline(j.rule)}</p>\n"
    )
    body += "".join(f"<p>{inline(line)}</p>\n" for line in (registered.lines if registered else []))
    body += "<p><strong>Evidence.</strong></p>\n"
    for intro, header, rows in j.tables:
        body += f"<p>{inline(intro)}</p>\n" + grid(header, [Cell.texts(*row) for row in rows], len(header))
    body += bullets([f"{name}: {v.outcome} — {v.reason}" for name, v in j.section.cells.items()])
    drawn = [(a, stem) for a in drawings for stem in a.content.svgs if set(DRAWS[stem]) & set(j.claim.grids)]
    grids = esc(", ".join(j.claim.grids))
    if drawn:  # each figure is drawn once, in the Figures section: linked here
        shown = ", ".join(f'<a href="#figure-{esc(stem)}">{esc(stem)}</a>' for _, stem in drawn)
        body += f"<p>The figures of this page drawn from the grids this claim reads ({grids}): {shown}.</p>\n"
    else:
        body += f"<p>No figure of this page draws the grids this claim reads ({grids}).</p>\n"
    outcome = f'<strong class="{verdict_class(j.verdict.outcome)}">Verdict: {esc(j.verdict.outcome)}</strong>'
    body += f'<p class="verdict">{outcome} — {inline(j.verdict.reason)}.</p>\n'
    if registered and registered.apart:
        body += f"<p>{inline(registered.apart[0])}</p>\n" + bullets([line[2:] for line in registered.apart[1:]])
    return section(f"claim-{index}", j.name, body + missing_html(j.missing))


def table_section(artefact: Artefact) -> str:
    table: Table = artefact.content
    body = grid([c.title for c in table.columns], table.rows, table.label_columns)
    body += "".join(f"<p>{inline(line)}</p>\n" for line in table.legend) + missing_html(table.missing)
    return section(artefact.name, table.title, body + links(own_files(artefact)))


def figure_section(artefact: Artefact) -> str:
    drawing: Drawing = artefact.content
    body = f"<p>{inline(drawing.caption)}</p>\n" + bullets(drawing.points)
    body += "".join(figure(artefact, stem) for stem in drawing.svgs)
    return section(artefact.name, drawing.title, body + missing_html(artefact.missing) + links(own_files(artefact)))


def provenance_section(artefacts: list[Artefact]) -> str:
    """Every run an artefact of the page read (grid, seed, state, config hash, the code that made it and when it
    started, the machines it computed on, which artefacts read it) and every Missing line (with the artefacts that
    name it). A run made before runs recorded one of these shows "not recorded" there."""
    runs = {run.run_id: run for a in artefacts for run in a.runs}
    rows = []
    for rid, run in runs.items():
        readers = ", ".join(a.name for a in artefacts if any(r.run_id == rid for r in a.runs))
        status = run.status or {}
        unrecorded = "not recorded" if status else "—"
        machines = status.get("machines") if isinstance(status.get("machines"), list) else []
        computed = " + ".join(describe(m) for m in machines if isinstance(m, dict)) or unrecorded
        codes = status.get("code") if isinstance(status.get("code"), list) else []
        code = " + ".join(short(c) for c in codes) or unrecorded
        started = status.get("started") if isinstance(status.get("started"), str) else unrecorded
        hashed = status.get("config_hash") or "—"
        rows.append(Cell.texts(rid, run.grid, run.seed, run.state, hashed, code, started, computed, readers))
    lines = {line: [a.name for a in artefacts if line in a.missing] for a in artefacts for line in a.missing}
    body = "<p>Every run the artefacts of this page read (code: the commit that made it, +dirty where its tree was "
    body += "not clean; started: its first session's start, UTC):</p>\n"
    header = ["run", "grid", "seed", "state", "config hash", "code", "started", "computed on", "read by"]
    body += grid(header, rows, labels=len(header))
    body += missing_html([f"{line} ({', '.join(names)})" for line, names in lines.items()])
    body += links([f"{a.name}.provenance.json" for a in artefacts], "What each artefact read, manifest digests too")
    return section("provenance", "Provenance", body, level=2)


def document(ev: Evidence, artefacts: list[Artefact], stamp: str) -> str:
    """The page's HTML: the summary (stamp, profile, results, the claims table), then the figures, the tables, each
    claim in detail and the provenance; `stamp` (date, code version) is the one line two builds of the same input
    differ in."""
    kinds = {kind: [a for a in artefacts if isinstance(a.content, kind)] for kind in (Claims, Drawing, Table)}
    claims, drawings, tables = kinds[Claims], kinds[Drawing], kinds[Table]
    built = ", ".join(f'<a href="#{esc(a.name)}">{esc(a.name)}</a>' for a in artefacts)
    results = f"results read from <code>{esc(ev.profile_results)}/</code> alone (reports never train)"
    parts = [f"<h1>GR-OPD reproduction: the {esc(ev.profile)} profile</h1>", f'<p class="stamp">{esc(stamp)}</p>']
    parts.append(f'<p class="meta">Profile <strong>{esc(ev.profile)}</strong>; {results}. ')
    parts[-1] += (
        f"This page shows the artefacts of its build: {built} (<code>./reproduce.sh all</code> builds every one).</p>"
    )
    statistics = CONVENTION + (f" {UNPAIRED}" if claims else "")
    parts.append(f'<p class="meta"><strong>Statistics.</strong> {inline(statistics)}</p>')
    parts.append(f'<p class="meta">The terms this page uses: <a href="{GLOSSARY}">{GLOSSARY}</a>.</p>')
    shown = [("claims", "Claims", claims), ("figures", "Figures", drawings), ("tables", "Tables", tables)]
    shown += [("claims-detail", "Each claim", claims), ("provenance", "Provenance", artefacts)]
    parts.append("<nav>" + "".join(f'<a href="#{i}">{title}</a>' for i, title, some in shown if some) + "</nav>")
    parts += [claims_table(a) for a in claims]
    parts += [section("figures", "Figures", "".join(map(figure_section, drawings)), level=2)] if drawings else []
    parts += [section("tables", "Tables", "".join(map(table_section, tables)), level=2)] if tables else []
    details = "".join(
        claim_section(i, j, drawings, a.content.registered.get(j.claim.key))
        for a in claims
        for i, j in enumerate(a.content.judged)
    )
    parts += [section("claims-detail", "Each claim: evidence, rule, verdict", details, level=2)] if claims else []
    parts.append(provenance_section(artefacts))
    title = f"<title>GR-OPD reproduction, {esc(ev.profile)} profile</title>"
    head = (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n{title}\n<style>{STYLE}</style>\n</head>\n'
    )
    return head + "<body>\n" + "\n".join(parts) + "\n</body>\n</html>\n"


def code_version(root: Path) -> str:
    """'git <commit>' of the checkout at `root` (with '+ uncommitted changes' where a tracked file differs from it:
    gropd/record/code.py; an untracked file, a `.venv` link say, is no change), else the installed package's
    version; no network."""
    code = code_record(root, untracked=False)
    if code["commit"]:
        return f"git {code['commit']}" + ("" if code["clean"] else " + uncommitted changes")
    try:
        return f"gropd-repro {importlib.metadata.version('gropd-repro')}"
    except importlib.metadata.PackageNotFoundError:
        return f"unknown (no git checkout: {code['why']}; gropd-repro not installed)"


def unstamped(text: str) -> str:
    """The page without its stamp line: what two builds of the same results have in common."""
    return STAMP.sub("", text)


def index(ev: Evidence, artefacts: list[Artefact]) -> Artefact:
    """The page of the artefacts of one build, as an artefact of its own (`index`): their runs, Missing lines and
    manifests are its sources."""
    built = datetime.now(UTC).isoformat(timespec="seconds")
    stamp = f"Built {built} from code {code_version(Path(__file__).resolve().parents[2])}."
    runs = list({run.run_id: run for a in artefacts for run in a.runs}.values())
    missing = list(dict.fromkeys(line for a in artefacts for line in a.missing))
    manifests = list(dict.fromkeys(m for a in artefacts for m in a.manifests))
    return Artefact("index", {"index.html": document(ev, artefacts, stamp)}, runs, missing, manifests)
