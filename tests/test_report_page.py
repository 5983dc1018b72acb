"""index.html (gropd/report/page.py) read back with the standard library's HTMLParser and checked against the files
it sits beside: every number of its tables equals the CSV's (to the decimals shown), every claim of claims.md has
the same verdict and reason, every figure is inline SVG, every link resolves to a file of the set or an id of the
page, nothing is loaded from outside. The checker is shown to fail on a page tampered with after the build."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_fixtures import P1, P2, P3, STEPS, metric_rows, scored, seeded, table1_grid, write_experiments, write_run

from gropd.report import build
from gropd.report.page import unstamped

NAMES = ["table1", "table2", "fig3", "table3", "table4", "table5", "table6", "claims"]  # fig1, fig4: as fig3, slower
LOADS = {"src", "href", "xlink:href", "data", "poster", "srcset", "action", "formaction", "background"}
EXTERNAL = re.compile(r"^\s*([a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)  # http:, https:, data:, //host, …
NUMBER = re.compile(r"[+\-−]?\d[\d,]*(?:\.\d+)?")
VERDICT = re.compile(r'(<td class="[a-z-]+">)(reproduced|not reproduced|not tested)(</td>)')


class Page(HTMLParser):
    """What the checks read of a page: each table with the id of the section around it (rows of cell texts), every
    id, every attribute that links or loads, the style text, the text of verdict paragraphs, the figures that hold
    an inline <svg> with drawn content."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.sections, self.tables, self.ids, self.loads, self.styles = [], [], set(), [], []
        self.verdicts, self.drawn, self.tags, self.svgs = [], {}, set(), Counter()
        self.cell = self.verdict = self.figure = None
        self.in_style = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        self.tags.add(tag)
        self.ids |= {a["id"]} if "id" in a else set()
        self.loads += [(tag, name, value or "") for name, value in attrs if name in LOADS]
        self.styles += [a["style"]] if a.get("style") else []
        if tag == "section":
            self.sections.append(a.get("id"))
        elif tag == "table":
            self.tables.append((self.sections[-1] if self.sections else None, []))
        elif tag == "tr":
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self.cell = []
        elif tag == "p" and a.get("class") == "verdict":
            self.verdict = []
        elif tag == "svg":
            self.svgs[a.get("aria-label")] += 1
        elif tag == "figure":
            self.figure = a.get("id")
            self.drawn[self.figure] = 0
        elif tag in ("path", "text", "use") and self.figure is not None:
            self.drawn[self.figure] += 1
        self.in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.sections.pop()
        elif tag in ("td", "th"):
            self.tables[-1][1][-1].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "p" and self.verdict is not None:
            self.verdicts.append(" ".join("".join(self.verdict).split()))
            self.verdict = None
        elif tag == "figure":
            self.figure = None
        self.in_style = False

    def handle_data(self, data: str) -> None:
        for sink in (self.cell, self.verdict):
            if sink is not None:
                sink.append(data)
        if self.in_style:
            self.styles.append(data)


def shown(text: str) -> list[tuple[float, int]]:
    """The numbers a cell shows, each with its decimals ('4,166.4' -> (4166.4, 1), '−1.50' -> (-1.5, 2))."""
    found = NUMBER.findall(text)
    return [(float(n.replace(",", "").replace("−", "-")), len(n.split(".")[1]) if "." in n else 0) for n in found]


def cell_problems(text: str, parts: list[str], values: list[str]) -> list[str]:
    """The CSV numbers of one cell the cell must show, in order, each equal to a shown number to its decimals: mean,
    std, interval ends, and n of an interval; counts other than 0 (a stats cell's n is its seeds column's)."""
    wanted = []
    for part, value in zip(parts, values, strict=True):
        if value in ("", "inf", "-inf", "nan") or (part == "n" and "ci_low" not in parts and "std" in parts):
            continue
        if part in ("n", "collapsed") and float(value) == 0:
            continue
        wanted.append((part, float(value)))
    numbers = iter(shown(text))
    for part, value in wanted:
        if not any(abs(value - number) <= 0.5 * 10**-decimals + 1e-9 for number, decimals in numbers):
            return [f"{part} {value!r} not shown in {text!r}"]
    return []


def columns(header: list[str], csv_header: list[str]) -> list[tuple[str, list[int]]] | None:
    """Each page column with the CSV columns it is: itself (a label) or '<title> <part>' ones (numbers)."""
    spans, k = [], 0
    for title in header:
        if k < len(csv_header) and csv_header[k] == title:
            spans, k = [*spans, (title, [k])], k + 1
            continue
        parts = []
        while k < len(csv_header) and csv_header[k].startswith(f"{title} "):
            parts, k = [*parts, k], k + 1
        if not parts:
            return None
        spans.append((title, parts))
    return spans if k == len(csv_header) else None


def table_problems(page: Page, out: Path) -> list[str]:
    """Every table of the set (a CSV) is on the page in the section of its name, cell for cell."""
    problems = []
    for path in sorted(out.glob("*.csv")):
        name = path.stem
        tables = [rows for section, rows in page.tables if section == name]
        if not tables:
            problems.append(f"{name}: not on the page")
            continue
        (header, *rows), (csv_header, *csv_rows) = tables[0], list(csv.reader(io.StringIO(path.read_text())))
        spans = columns(header, csv_header)
        if spans is None or len(rows) != len(csv_rows):
            problems.append(f"{name}: columns {header} or {len(rows)} rows do not match {path.name}")
            continue
        for i, (row, csv_row) in enumerate(zip(rows, csv_rows, strict=True)):
            for (title, span), text in zip(spans, row, strict=True):
                values = [csv_row[k] for k in span]
                if len(span) == 1 and csv_header[span[0]] == title:
                    found = [] if text == values[0] else [f"{text!r} is {values[0]!r} in the CSV"]
                else:
                    found = cell_problems(text, [csv_header[k][len(title) + 1 :] for k in span], values)
                problems += [f"{name} row {i + 1}, {title}: {p}" for p in found]
    return problems


def plain(markdown: str) -> str:
    return markdown.replace("\\|", "|").replace("**", "").replace("`", "").strip()


def claim_problems(page: Page, out: Path) -> list[str]:
    """claims.md's summary rows (claim, verdict, why) are the page's claims table, and its verdict lines the page's."""
    md = (out / "claims.md").read_text()
    summary = md[md.index("| claim | verdict | why |") :].split("\n\n", 1)[0].splitlines()[2:]
    rows = [[plain(c) for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in summary]
    tables = [rows for section, rows in page.tables if section == "claims"]
    problems = (
        [] if tables and tables[0][1:] == rows else [f"claims table {tables[0][1:] if tables else None} != {rows}"]
    )
    verdicts = [plain(line) for line in md.splitlines() if line.startswith("**Verdict: ")]
    return problems + ([] if page.verdicts == verdicts else [f"verdicts {page.verdicts} != claims.md {verdicts}"])


def in_checkout(link: str) -> bool:
    """A link from paper_figures/<profile>/ to a file of the repository (the glossary): ../../<path>, which exists."""
    return link.startswith("../../") and (Path(__file__).resolve().parents[1] / link[len("../../") :]).is_file()


def page_problems(text: str, out: Path) -> list[str]:
    """Everything wrong with the page `text` published in `out`; [] when it is right."""
    page, files = Page(text), {p.name for p in out.iterdir()}
    problems = table_problems(page, out) + claim_problems(page, out)
    drawn = {stem: page.drawn.get(f"figure-{stem}", 0) for stem in (p.stem for p in out.glob("*.png"))}
    problems += [f"figure {stem} is not inline SVG" for stem, n in drawn.items() if not n]
    problems += [f"svg {label!r} is drawn {n} times (once, then linked)" for label, n in page.svgs.items() if n > 1]
    for tag, name, value in page.loads:
        if EXTERNAL.match(value):
            problems.append(f"<{tag} {name}={value!r}> loads from outside")
        elif value.startswith("#") and value[1:] not in page.ids:
            problems.append(f"<{tag} {name}={value!r}>: no such id")
        elif not value.startswith("#") and value not in files and not in_checkout(value):
            problems.append(f"<{tag} {name}={value!r}>: no such file in the set")
    imports = [s for s in page.styles if re.search(r"@import|url\(\s*['\"]?\s*([a-z]+:|//)", s, re.IGNORECASE)]
    problems += [f"style loads from outside: {s.strip()[:60]!r}" for s in imports]
    return problems + [f"<{tag}> on the page" for tag in ("script", "link", "iframe", "img") if tag in page.tags]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """Every artefact but Figures 1 and 4 built from a small world: Table 1 at two seeds (std, paired intervals, bold, a
    collapsed seed), the λ and γ sweeps with dynamics and pressure, Table 6, the claims."""
    root = tmp_path_factory.mktemp("page")
    write_experiments(root, grids={"table1": table1_grid(P1, P3, seeds=(0, 1))})
    dynamics = metric_rows(STEPS, verifier_reward=lambda s: 0.3 + 0.01 * s, mean_response_len=50.0)
    dynamics = [row | {"pressure_normalised": 1.0 + row["step"], "pressure_retained": 0.5} for row in dynamics]
    scored(root, f"table1__{P1}__gropd", [40.25, 41.5], metrics=dynamics)
    scored(root, f"table1__{P1}__opd", [38.0, 38.625], metrics=dynamics)
    scored(root, f"table1__{P3}__gropd", [20.0, 23.0], metrics=dynamics)
    scored(root, f"table1__{P3}__opd", [None, 10.0], metrics=dynamics)
    for run_id in (f"lambda__{P1}__gropd-lam0.5", f"lambda__{P1}__opd", f"gamma__{P2}__gropd-lam0.2-gamma1"):
        write_run(root / "results", "tiny", run_id, metrics=dynamics)
    scored(root, "table6__B1.7-default", [25.0])
    build(NAMES, profile="tiny", results_root=root / "results", experiments_dir=root / "experiments", out_root=root)
    return root / "tiny"


def test_the_page_equals_the_files_it_sits_beside(built):
    text = (built / "index.html").read_text()
    assert page_problems(text, built) == []
    assert text.count("<svg") == 2  # fig3a, fig3b once each; claim 4 links fig3a (lambda), claim 5 fig3b (gamma)
    assert text.count('href="#figure-fig3a"') == 1 and text.count('href="#figure-fig3b"') == 1
    assert f"results read from <code>{built.parent / 'results' / 'tiny'}/</code>" in text
    assert re.search(r'<p class="stamp">Built \d{4}-\d\d-\d\dT[^<]+ from code (git [0-9a-f]{40}|gropd-repro )', text)
    assert '<p class="stamp">' not in unstamped(text)


def test_a_changed_table_number_is_reported(built):
    text = (built / "index.html").read_text()
    start = text.index('<section id="table1">')
    cell = re.compile(r'<td class="num">(?:<strong>)?(\d+)\.(\d\d) ± ').search(text, start)  # a Macro or suite mean
    tampered = text[: cell.start(1)] + str(int(cell.group(1)) + 1) + text[cell.end(1) :]
    problems = page_problems(tampered, built)
    assert len(problems) == 1 and problems[0].startswith("table1 row 1") and "mean" in problems[0]


def test_a_changed_verdict_is_reported(built):
    text = (built / "index.html").read_text()
    found = VERDICT.search(text)
    other = "reproduced" if found.group(2) != "reproduced" else "not tested"
    tampered = text[: found.start(2)] + other + text[found.end(2) :]
    assert [p[:13] for p in page_problems(tampered, built)] == ["claims table "]
    verdict = re.search(r"Verdict: (reproduced|not reproduced|not tested)", text)
    tampered = text[: verdict.start(1)] + other + text[verdict.end(1) :]
    assert [p[:9] for p in page_problems(tampered, built)] == ["verdicts "]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda t: t.replace('<figure id="figure-fig3b">', '<figure id="figure-gone">'), "figure fig3b is not inline"),
        (lambda t: t.replace("<body>", '<body><img src="https://example.org/a.png">'), "loads from outside"),
        (lambda t: t.replace('href="table1.csv"', 'href="http://example.org/table1.csv"'), "loads from outside"),
        (lambda t: t.replace("<body>", "<body><style>@import 'x.css';</style>"), "style loads from outside"),
        (lambda t: t.replace('href="table1.csv"', 'href="table9.csv"'), "no such file in the set"),
        (lambda t: t.replace('href="#claim-0"', 'href="#claim-99"'), "no such id"),
    ],
)
def test_a_missing_figure_a_broken_link_or_an_outside_load_is_reported(built, change, expected):
    tampered = change((built / "index.html").read_text())
    assert any(expected in problem for problem in page_problems(tampered, built))


def test_the_provenance_names_the_code_start_and_machine_of_each_run(tmp_path: Path) -> None:
    """A run's status.json `code`, `started` and `machines` (gropd/record/code.py, gropd/numerics.py: machine_record)
    in the provenance table's "code", "started" and "computed on" columns; a run made before runs recorded them
    (no such fields, a machine record without `libc`) shows "not recorded" there."""
    write_experiments(tmp_path, grids={"table1": table1_grid(P1, seeds=(0, 1))})
    machine = {
        "numerics": "portable",
        "aten_capability": "DEFAULT",
        "threads": 1,
        "torch": "2.13.0+cpu",
        "mkl": "2024.2-Product Build 20240605",
        "cpu": {"vendor": "AuthenticAMD", "model_name": "AMD EPYC 7B13", "family": "25", "model": "1"},
    }
    code = [{"commit": "f1dcf815bbaac387ee199f1045edf19b8fa9c24f", "clean": True}, {"commit": "0123abc" + "0" * 33}]
    recorded = {"machines": [{**machine, "libc": "glibc 2.36"}], "code": code, "started": "2026-12-05T20:07:13+00:00"}
    write_run(tmp_path / "results", "tiny", f"table1__{P1}__opd", fields=recorded, metrics=metric_rows(STEPS))
    old = {"machines": [machine], "code": [{"commit": None, "clean": None, "why": "no git executable on PATH"}]}
    opd1 = seeded(f"table1__{P1}__opd", 1)
    write_run(tmp_path / "results", "tiny", opd1, fields=old, metrics=metric_rows(STEPS))
    scored(tmp_path, f"table1__{P1}__gropd", [30.0, 31.0])
    build(
        ["table1"],
        profile="tiny",
        results_root=tmp_path / "results",
        experiments_dir=tmp_path / "experiments",
        out_root=tmp_path / "out",
    )
    page = Page((tmp_path / "out" / "tiny" / "index.html").read_text())
    rows = {row[0]: row for section, table in page.tables if section == "provenance" for row in table[1:]}
    header = next(table[0] for section, table in page.tables if section == "provenance")
    columns = ("code", "started", "computed on")
    shown = {rid: {name: row[header.index(name)] for name in columns} for rid, row in rows.items()}
    amd = "portable · AuthenticAMD AMD EPYC 7B13 (family 25 model 1) · ATen DEFAULT · torch 2.13.0+cpu, MKL 2024.2, "
    assert shown[f"table1__{P1}__opd"] == {
        "code": "f1dcf81 + 0123abc+dirty",
        "started": "2026-12-05T20:07:13+00:00",
        "computed on": amd + "glibc 2.36 · 1 thread(s)",
    }
    assert shown[opd1] == {
        "code": "unknown (no git executable on PATH)",
        "started": "not recorded",
        "computed on": amd + "C library not recorded · 1 thread(s)",
    }
    assert shown[f"table1__{P1}__gropd"] == dict.fromkeys(columns, "not recorded")
