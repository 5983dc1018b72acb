"""Tables 1–6. Tables 1, 2 and 6 render settings × seeds of the evidence layer; 3–5 the manifests (5 also
the K and question counts the evaluations recorded)."""

from __future__ import annotations

from typing import Any

from gropd.config import ConfigError
from gropd.config.grids import expand_grid, load_grid
from gropd.config.lock import pinned_revision, read_lock
from gropd.credit import BASELINE, METHODS, PROPOSED
from gropd.report.evidence import Evidence, Final, Setting, num, score_comparisons, setting_key
from gropd.report.formats import INTERVAL, STATS, Cell, Column, Table, interval_cell, render_table, stats_cell
from gropd.report.publish import Artefact
from gropd.report.stats import CONVENTION, EVALUATIONS, Interval, stats
from gropd.runs.plan import plan_entry


def compared(s: Setting) -> bool:
    """Whether the setting's method is one of Table 1's two, PROPOSED and BASELINE (the others: controls)."""
    return s.record is not None and s.record.role in ("proposed", "baseline")


CALL = {1: "better", -1: "worse", 0: "not resolved"}


def built_from(ev: Evidence, grids: str) -> str:
    return f"Built from `{ev.profile_results}/` ({ev.profile} profile), {grids}."


def artefact(ev: Evidence, table: Table, settings: list[Setting], manifests: list[str], grids: tuple = ()) -> Artefact:
    runs = [run for s in settings for run in s.runs]
    return Artefact(table.name, render_table(table), runs, table.missing, manifests, grids, content=table)


def seeds_cell(n: int, collapsed: int) -> Cell:
    text = f"{n}" + (f" + {collapsed} collapsed" if collapsed else "") if n else f"{collapsed} collapsed"
    return Cell(text if n or collapsed else "0", numbers=(n, collapsed))


def delta_cell(
    interval: Interval | None, row: tuple[dict[int, Final], int], ref: tuple[dict[int, Final], int], name: str, d: int
) -> Cell:
    """Δ Macro of a row against the method `name` (`interval`: paired over the seeds both finished); collapses named."""
    text = "—" if interval is None else interval.text(d) + (f", {CALL[interval.call]}" if interval.n > 1 else "")
    if (row[0] or row[1]) and (row[1] or ref[1]):
        text += f"; collapsed: {name} {ref[1]} of {len(ref[0]) + ref[1]}, this row {row[1]} of {len(row[0]) + row[1]}"
    return interval_cell(interval, d, text.removeprefix("—; "))


def finals(s: Setting, suites: list[str]) -> tuple[tuple[dict[int, Final], int], list[str]]:
    """((seed -> Final of each finished seed, how many seeds collapsed), the missing lines of the others)."""
    values, lines = s.collect(lambda run: run.final(suites))
    return (values, sum(run.state == "collapsed" for run in s.seeds().values())), lines


def table1(ev: Evidence) -> Artefact:
    """Avg@K per suite and Macro of every pairing × method of grids table1 and baselines, with paired Δ Macro."""
    suites, d = list(ev.suites), ev.report.decimals
    settings = [s for s in ev.settings("table1", "baselines") if s.config.get("kind") == "train"]
    settings = [s for s in settings if "table1" in s.grids or any(run.status for run in s.runs)]  # a control: once run
    order = {p: i for i, p in enumerate(dict.fromkeys(s.pairing for s in settings))}
    settings.sort(key=lambda s: (order[s.pairing], {PROPOSED: 0, BASELINE: 1}.get(str(s.method), 2)))
    found, missing = [], []
    for s in settings:
        found_s, lines = finals(s, suites)
        found.append(found_s)
        missing += lines
    beyond = not all(map(compared, settings))
    ks = {suite: sorted({f.k[suite] for values, _ in found for f in values.values() if f.k[suite]}) for suite in suites}
    header = [*Column.texts("Pairing", "Method"), Column("seeds", ("n", "collapsed"))]
    titles = {k: f"{r.get('title', k)} Avg@{','.join(map(str, ks[k])) or r.get('k')}" for k, r in ev.suites.items()}
    header += [Column(title, STATS) for title in titles.values()]
    header += [Column("Macro", STATS), Column("Δ Macro vs vanilla OPD", INTERVAL)]
    header += [Column("Δ Macro vs GR-OPD", INTERVAL)] if beyond else []

    columns, comparisons = len(suites) + 1, {}

    def versus(i: int, j: int | None) -> list[Interval | None]:
        """Row i against row j per column, computed once: the bold and the Δ read the same intervals (j None: no
        comparison, every column None)."""
        if j is None:
            return [None] * columns
        if (i, j) not in comparisons:
            comparisons[i, j] = score_comparisons(found[i][0], found[j][0], columns)
        return comparisons[i, j]

    rows = []
    for i, s in enumerate(settings):
        same = {o.method: j for j, o in reversed(list(enumerate(settings))) if o.pairing == s.pairing and o.registered}
        ref = {m: same.get(m) if s.registered else None for m in (PROPOSED, BASELINE)}  # registered rows compared only
        (values, collapsed), rival = found[i], ref[BASELINE if s.record and s.record.role == "proposed" else PROPOSED]
        row = [*Cell.texts(ev.title(s.pairing), s.label), seeds_cell(len(values), collapsed)]
        for column, interval in enumerate(versus(i, rival if compared(s) else None)):
            bold = interval is not None and interval.call == 1
            empty = "Collapse" if collapsed and not values else "—"
            row.append(stats_cell(stats([f.scores[column] for f in values.values()]), d, bold, empty))
        for against_name in (BASELINE, PROPOSED)[: 2 if beyond else 1]:
            j = ref[against_name]
            show = j is not None and j != i and (against_name == BASELINE or not compared(s))
            label = METHODS[against_name].label
            row.append(delta_cell(versus(i, j)[-1], found[i], found[j], label, d) if show else interval_cell(None, d))
        rows.append(row)
    legend = [
        f"Avg@K (%) per suite, with the K the runs recorded; Macro: the unweighted mean of a run's {len(suites)} "
        f"unrounded suite scores; {d} decimals. {CONVENTION}",
        "Δ Macro: this row minus the named method, per seed over the seeds both finished: mean [95% t interval] (n), "
        "'better' or 'worse' when the interval excludes 0. Bold: GR-OPD or vanilla OPD where the paired comparison of "
        "that column calls it better. Collapse: every seed collapsed (collapsed seeds are in no mean: see Missing).",
    ]
    if beyond:
        legend.append("Methods marked 'beyond the paper' (grid baselines) are controls the paper does not run.")
    legend.append(built_from(ev, "grids table1 and baselines" if beyond else "grid table1"))
    table = Table("table1", "Table 1: GR-OPD vs vanilla OPD, Avg@K", legend, header, rows, missing, 2)
    manifests = ["grids/table1.yaml", "grids/baselines.yaml", "suites.yaml", "pairings.yaml", "train.yaml"]
    return artefact(ev, table, settings, manifests, ("table1",))


def reference(entries: list[Any], match: dict[str, Any], fields: dict[str, str]) -> list[Cell]:
    """The paper's published values (field -> format, as the paper prints it) of the matching entry, or '—'."""
    for ref in entries:
        if all(getattr(ref, k) == v for k, v in match.items()):
            return [Cell(format(getattr(ref, name), spec)) for name, spec in fields.items()]
    return [Cell("—") for _ in fields]


def table2(ev: Evidence) -> Artefact:
    """The pressure proxies of the GR-OPD settings of grid lambda, and each setting's Macro paired with its pairing's
    vanilla OPD and with Table 1's GR-OPD (the λ of grid table1)."""
    swept = ev.settings("lambda")
    settings = [s for s in swept if s.record and s.record.reads("gropd.lam")]  # λ's settings
    paper, d, suites = ev.profile == "paper", ev.report.decimals, list(ev.suites)
    pairings = {s.pairing for s in settings}
    references = {  # (pairing, method) -> (setting key, finals) of what a row's Macro is paired with, read once
        (s.pairing, str(s.method)): (setting_key(s.config), finals(s, suites)[0])
        for s in [*ev.settings("table1"), *swept]
        if s.pairing in pairings and (str(s.method) == BASELINE or (str(s.method) == PROPOSED and "table1" in s.grids))
    }
    header = [*Column.texts("Pairing", "λ", "γ"), Column("seeds", ("n",))]
    header += [Column("normalised pressure", STATS), Column("retained pressure", STATS), Column("Macro", STATS)]
    header += [Column("Δ Macro vs vanilla OPD", INTERVAL), Column("Δ Macro vs Table 1's GR-OPD", INTERVAL)]
    header += Column.texts("paper (reference): normalised", "paper (reference): retained") if paper else []
    rows, missing = [], []
    for s in settings:
        medians, lines = s.collect(lambda run: run.pressure())
        mine, final_lines = finals(s, suites)
        missing += [line for line in dict.fromkeys([*lines, *final_lines]) if line not in missing]
        lam, gamma = s.knob("lam"), s.knob("gamma")
        row = [*Cell.texts(ev.title(s.pairing), num(lam), num(gamma)), Cell.count(len(medians))]
        row += [stats_cell(stats([m[i] for m in medians.values()]), d) for i in (0, 1)]
        row.append(stats_cell(stats([f.macro for f in mine[0].values()]), d))
        for method, name in ((BASELINE, METHODS[BASELINE].label), (PROPOSED, "Table 1's GR-OPD")):
            key, against = references.get((s.pairing, method), (None, None))
            if against is None or key == setting_key(s.config):
                row.append(interval_cell(None, d))
                continue
            macro = score_comparisons(mine[0], against[0], len(suites) + 1)[-1]
            row.append(delta_cell(macro, mine, against, name, d))
        refs = ev.report.paper_reference.table2
        match = {"pairing": s.pairing, "lam": lam, "gamma": gamma}
        rows.append(row + (reference(refs, match, {"normalised": ".2f", "retained": ".2f"}) if paper else []))
    legend = [
        "Per run: the median over its logged rollout batches (a collapsed run: up to its collapse) of the normalised "
        "pressure P = mean over prompt groups of |μ_g| / (σ_g + ε), and of the retained pressure λ·P; a median, as "
        f"single batches reach hundreds of times the typical value. {d} decimals. {CONVENTION}",
        "Macro: as Table 1's, over the seeds that finished. Δ Macro: this row minus its pairing's vanilla OPD, or "
        "minus Table 1's GR-OPD setting of that pairing (— on that row itself), per seed over the seeds both "
        "finished: mean [95% t interval] (n), 'better' or 'worse' when the interval excludes 0; described, judged by "
        "no claim.",
        "Settings: the GR-OPD settings of grid lambda, each pooling every run of its config in any grid (Table 1's "
        "runs included)." + (" Paper columns: the published values, for reference." if paper else ""),
        built_from(ev, "grid lambda and the runs pooled with it"),
    ]
    table = Table("table2", "Table 2: teacher pressure and Macro by λ", legend, header, rows, missing, 3)
    manifests = ["grids/lambda.yaml", "grids/table1.yaml", "pairings.yaml", "train.yaml", "report.yaml"]
    return artefact(ev, table, settings, manifests, ("lambda",))


def table6(ev: Evidence) -> Artefact:
    """The pre-OPD reference evaluations (grid table6): Macro Avg@K and mean tokens per (model, mode)."""
    suites, d, paper = list(ev.suites), ev.report.decimals, ev.profile == "paper"
    settings = ev.settings("table6")
    models = ev.manifests.models.get(ev.profile) or {}
    header = [*Column.texts("model", "mode", "role"), Column("evaluation seeds", ("n",))]
    header += [Column("Macro Avg@K", STATS), Column("mean tokens", STATS)]
    header += Column.texts("paper (reference): Macro Avg@K", "paper (reference): mean tokens") if paper else []
    rows, missing = [], []
    for s in settings:
        finals, lines = s.collect(lambda run: run.final(suites))
        missing += lines
        model, mode = s.config.get("model"), s.config.get("mode")
        record = models.get(model) or {}
        tokens = [t for f in finals.values() if (t := f.mean_tokens) is not None]
        row = [*Cell.texts(record.get("name", model), mode, record.get("role", "—")), Cell.count(len(finals))]
        row += [stats_cell(stats([f.macro for f in finals.values()]), d), stats_cell(stats(tokens), 1)]
        refs = ev.report.paper_reference.table6
        rows.append(
            row
            + (
                reference(refs, {"model": model, "mode": mode}, {"macro": ".3f", "mean_tokens": ",.1f"})
                if paper
                else []
            )
        )
    legend = [
        f"Macro: unweighted mean of the {len(suites)} unrounded suite Avg@K (%), {d} decimals; mean tokens: unweighted "
        f"mean of the suites' mean response tokens, 1 decimal. {EVALUATIONS}"
        + (" Paper columns: the published values, for reference." if paper else ""),
        built_from(ev, "grid table6"),
    ]
    table = Table("table6", "Table 6: pre-OPD references", legend, header, rows, missing, 3)
    manifests = ["grids/table6.yaml", "models.yaml", "suites.yaml", "report.yaml"]
    return artefact(ev, table, settings, manifests, ("table6",))


TABLE3 = (
    ("prompts_per_batch", "prompts per rollout batch"),
    ("group_size", "responses per prompt, G"),
    ("per_device_batch", "per-device train batch"),
    ("grad_accum", "gradient-accumulation steps"),
    ("replicas", "student data-parallel replicas"),
    ("minibatch_responses", "responses per optimisation minibatch"),
)


def table3(ev: Evidence) -> Artefact:
    """Table 3's six numbers and the optimiser steps they imply, as table1's runs resolve them in this profile
    (and, beside the tiny profile, in the paper profile)."""
    profiles = [ev.profile] + (["paper"] if ev.profile != "paper" else [])
    values: dict[str, dict[str, list[int]]] = {}
    for profile in profiles:
        for entry in expand_grid(load_grid("table1", ev.experiments_dir)):
            train = plan_entry(ev.manifests, profile, entry, [], ev.results_root).config.train
            steps = train.prompts_per_batch * train.group_size // train.minibatch_responses
            for key, value in [*((k, getattr(train, k)) for k, _ in TABLE3), ("steps", steps)]:
                values.setdefault(key, {}).setdefault(profile, []).append(value)
    joined = {k: [", ".join(map(str, dict.fromkeys(values[k][p]))) for p in profiles] for k in values}
    rows = [Cell.texts(label, *joined[k]) for k, label in [*TABLE3, ("steps", "optimiser steps per rollout batch")]]
    legend = ["The training setting of grid table1's runs, resolved from experiments/ (train.yaml, profiles/)."]
    header = Column.texts("quantity", *(f"{p} profile" for p in profiles))
    table = Table("table3", "Table 3: training setting", legend, header, rows)
    manifests = ["train.yaml", *(f"profiles/{p}.yaml" for p in profiles)]
    return Artefact("table3", render_table(table), manifests=manifests, content=table)


def table4(ev: Evidence) -> Artefact:
    """Table 4: label, name, repo, short revision; the paper profile adds the full revision pinned in the lock."""
    lock_path, paper = ev.experiments_dir / "lock.yaml", ev.profile == "paper"
    lock = read_lock(lock_path)
    rows = []
    for label, record in (ev.manifests.models.get(ev.profile) or {}).items():
        source = record.get("source") or {}
        hub = source.get("kind") == "hub"
        repo = str(source.get("repo")) if hub else f"built by the suite ({source.get('kind')})"
        row = Cell.texts(label, record.get("name", label), repo, source.get("revision") if hub else "—")
        if paper:
            try:
                full = pinned_revision(lock, repo, str(source.get("revision")), lock_path) if hub else "—"
            except ConfigError:
                full = "unpinned: run ./reproduce.sh pin"
            row.append(Cell(full))
        rows.append(row)
    header = Column.texts("label", "model", "repo", "revision", *(["full revision (lock.yaml)"] if paper else []))
    lock_note = "; full revisions from experiments/lock.yaml." if paper else "."
    legend = f"From experiments/models.yaml, section {ev.profile}{lock_note}"
    table = Table("table4", "Table 4: models", [legend], header, rows, label_columns=len(header))
    return Artefact("table4", render_table(table), manifests=["models.yaml", "lock.yaml"], content=table)


def table5(ev: Evidence) -> Artefact:
    """Table 5: suite, K (suites.yaml), the K and question counts the evaluations recorded, the paper's count."""
    recorded: dict[str, dict[str, set[int]]] = {}
    runs = [run for s in ev.settings() for run in s.runs]
    for run in runs:
        for suite, record in ((run.summary or {}).get("suites") or {}).items():
            for key in ("k", "questions"):
                if isinstance(record, dict) and isinstance(record.get(key), int):
                    recorded.setdefault(suite, {}).setdefault(key, set()).add(record[key])

    def counts(*values: int | None) -> str:
        return ", ".join(f"{v:,}" for v in sorted(values)) if values and None not in values else "—"

    rows, paper_total, used_total = [], [], []
    for key, record in ev.suites.items():
        seen = {part: recorded.get(key, {}).get(part, set()) for part in ("k", "questions")}
        paper_total.append(record.get("paper_questions"))
        used_total.append(max(seen["questions"], default=None))
        rows.append(Cell.texts(record.get("title", key), record.get("k"), counts(*seen["k"]), counts(paper_total[-1])))
        rows[-1].append(Cell(counts(*seen["questions"])))
    totals = [sum(t) if t and None not in t else None for t in (paper_total, used_total)]
    rows.append(Cell.texts("Total", "", "", *(counts(total) for total in totals)))
    header = Column.texts("suite", "K (suites.yaml)", "K recorded", "paper questions", "questions used")
    legend = [
        f"From experiments/suites.yaml, section {ev.profile}; 'recorded' and 'used': what the evaluation summaries "
        "of this profile's runs recorded (total: the largest count per suite).",
        built_from(ev, "every grid's evaluations"),
    ]
    table = Table("table5", "Table 5: evaluation suites", legend, header, rows)
    return Artefact("table5", render_table(table), runs, manifests=["suites.yaml"], content=table)
