"""The evidence layer: results/ read once, each grid as settings × seeds, each seed with every number an artefact
needs (Final, Trend, pressure) or the reason it has none, which `missing` alone turns into a line.

Runs are read through RunDir and must pass `RunDir.check`, the hash check `grid` applies, so an edited or broken
file stops the report naming it; a run not started has the config its grid entry resolves to now. A *setting* is
every run of one config apart from naming, seed, threads and numerics mode, in any grid (twins count once per seed).
The registered setting of a grid entry is the entry resolved from the grids and the profile alone: experiments/runs/
(files a user edits) never speaks for it, and a run whose run file or overrides changed it is labelled by what differs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property, reduce
from pathlib import Path
from typing import Any

import numpy as np

from eval.metrics import macro
from gropd.config import ConfigError, load_manifests, resolve_run
from gropd.config.grids import RunEntry, expand_grid, grid_names, load_grid
from gropd.config.layering import dotted_to_nested, nested_to_dotted
from gropd.credit import METHODS
from gropd.horizon import horizon_grid
from gropd.record.ranges import planned_k
from gropd.record.run_dir import DONE, RunDir
from gropd.report.registration import Registration, load_registration
from gropd.report.seed_dirs import seeds_on_disk
from gropd.report.settings import ReportSettings
from gropd.report.stats import Interval, paired
from gropd.runs.lifecycle import settings_hash
from gropd.runs.plan import EDITED_RUN_FILE

SHOWN = set("kind grid pairing method model mode seed run_id".split())  # grid values a label shows otherwise (or never)
SHOWN |= {key for record in METHODS.values() for key, _ in record.knobs}
TREND_FRACTION = 0.1  # trends compare the mean over the first and the last 10% of a run's logged steps
RANK = {"finished": 5, "collapsed": 4, "trained": 3, "running": 2, "failed": 1, "not run": 0}


def num(value: Any) -> str:
    """0.25 -> '0.25', 1.0 -> '1'."""
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def project_path(path: Path) -> Path:
    """`path` as the project names it: relative to the repository root (the directory reports are built in, as the
    CLI is) when inside it, e.g. results/reference; else as given. Artefacts name files so, never by the builder's
    absolute path, which means nothing on another machine."""
    root = Path.cwd()
    for candidate in (path.absolute(), path.resolve()):
        if candidate.is_relative_to(root):
            return candidate.relative_to(root)
    return path


def missing(run: Run, reason: str) -> str:
    """The one line every artefact (and its provenance sidecar) prints for a run it could not use."""
    return f"`{run.run_id}`: {reason}"


def number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of one metric, skipping rows where it is null, missing or not finite."""
    pairs = [(float(row["step"]), v) for row in rows if (v := number(row.get(key))) is not None]
    return [s for s, _ in pairs], [v for _, v in pairs]


def windows(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]] | None:
    """The first and the last TREND_FRACTION of `key`'s logged values (None: never logged)."""
    _, values = series(rows, key)
    k = max(1, math.ceil(TREND_FRACTION * len(values)))
    return (values[:k], values[-k:]) if values else None


def first_last(rows: list[dict[str, Any]], key: str) -> tuple[float, float] | None:
    """Mean of `key` over the first and over the last TREND_FRACTION of its logged values."""
    found = windows(rows, key)
    return None if found is None else (statistics.fmean(found[0]), statistics.fmean(found[1]))


def first_last_errors(rows: list[dict[str, Any]], key: str) -> tuple[float, float] | None:
    """Standard errors of first_last's two means: sample std / sqrt(k) of each window (0 for a window of one)."""
    found = windows(rows, key)
    error = lambda w: statistics.stdev(w) / math.sqrt(len(w)) if len(w) > 1 else 0.0  # noqa: E731
    return None if found is None else (error(found[0]), error(found[1]))


@dataclass(frozen=True)
class Final:
    """A finished run's evaluation over the profile's suites: Avg@K, the K it recorded, mean tokens (None when not
    recorded); Macro: eval.metrics.macro of the unrounded suite Avg@K (the one definition, summary.json's too)."""

    avg: dict[str, float]
    k: dict[str, int | None]
    tokens: dict[str, float | None]

    @property
    def macro(self) -> float:
        return macro(self.avg)

    @property
    def mean_tokens(self) -> float | None:
        """Table 6's mean tokens: the unweighted mean over suites of each suite's mean response length (None when a
        suite did not record it)."""
        values = list(self.tokens.values())
        return None if None in values else sum(values) / len(values)

    @cached_property
    def scores(self) -> list[float]:
        """Table 1's numbers of the run, in its column order: each suite's Avg@K, then Macro."""
        return [*self.avg.values(), self.macro]


def score_comparisons(a: dict[int, Final], b: dict[int, Final], columns: int) -> list[Interval | None]:
    """Per score of `columns` (Final.scores' order), the paired interval of a − b over the seeds both finished
    (stats.paired; None where they share none)."""
    return [
        paired({s: f.scores[c] for s, f in a.items()}, {s: f.scores[c] for s, f in b.items()}) for c in range(columns)
    ]


@dataclass(frozen=True)
class Trend:
    """A run's dynamics, (first, last) TREND_FRACTION means (None: not logged), its length cap and collapse step;
    the standard errors of the length and reward means (first_last_errors; None: not known) and the windows' size."""

    length: tuple[float, float] | None
    reward: tuple[float, float] | None
    pearson: tuple[float, float] | None
    cap: int | None
    collapse_step: int | None
    length_error: tuple[float, float] | None = None
    reward_error: tuple[float, float] | None = None
    window: int | None = None  # how many logged steps each TREND_FRACTION window holds (the reward's)


@dataclass
class Run:
    """One run of a grid: its entry, status.json (None: not run), config and files, read once."""

    entry: RunEntry
    path: Path
    status: dict[str, Any] | None
    config: dict[str, Any]
    summary: dict[str, Any] | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    horizon: dict[str, Any] | None = None
    unresolved: str = ""  # why a run not started cannot run in this profile
    broken: str = ""  # why its record cannot be believed (RunDir.record_problem): shown missing, never a number

    run_id = property(lambda self: self.entry.run_id)
    grid = property(lambda self: str(self.entry.values["grid"]))
    seed = property(lambda self: int(self.config.get("seed", 0)))
    state = property(
        lambda self: "not run" if self.status is None else "broken" if self.broken else str(self.status["status"])
    )

    # of twin runs of one seed, the one that speaks for it: the furthest along, then the original over a copy
    preference = property(lambda self: (RANK.get(self.state, 0), "copied_from" not in (self.status or {})))
    ended = property(lambda self: self.state in DONE or self.state == "trained")  # training over

    def describe(self) -> str:
        """Why the run has no final result: 'not run', 'running, step 40 of 100', 'collapsed at step 7: …'."""
        status = self.status or {}
        steps = (self.config.get("train") or {}).get("steps", "?")
        reason = f": {status['reason']}" if status.get("reason") else ""
        return {
            "running": f"running, step {status.get('step', 0)} of {steps}",
            "trained": "trained, evaluation not finished",
            "collapsed": f"collapsed at step {status.get('collapse_step')}{reason}",
            "failed": f"failed{reason}",
            "broken": f"broken record: {self.broken}",
            "not run": "not run" + (f"; it cannot run in this profile: {self.unresolved}" if self.unresolved else ""),
        }.get(self.state, self.state)

    def final(self, suites: list[str]) -> Final | str:
        """The evaluation over `suites`, or why there is none (naming eval/summary.json when it is at fault)."""
        if self.state != "finished":
            return self.describe()
        path, records = RunDir(self.path).summary_path, (self.summary or {}).get("suites")
        if not isinstance(records, dict) or not records:
            return f"finished, but {path} is missing" if self.summary is None else f"{path} has no suites"
        records = {s: records[s] if isinstance(records.get(s), dict) else {} for s in suites}
        if lacking := [s for s in suites if number(records[s].get("avg_at_k")) is None]:
            return f"{path} has no Avg@K of {', '.join(lacking)}"
        avg, k = {s: float(records[s]["avg_at_k"]) for s in suites}, {s: records[s].get("k") for s in suites}
        return Final(avg, k, {s: number(records[s].get("mean_tokens")) for s in suites})

    def dynamics_reason(self) -> str | None:
        """Why the run has no training dynamics (None: it has them)."""
        if not self.ended:
            return self.describe()
        return None if self.metrics else f"no records in {RunDir(self.path).metrics_path}"

    def trend(self) -> Trend | str:
        if reason := self.dynamics_reason():
            return reason
        return Trend(
            *(first_last(self.metrics, key) for key in DYNAMICS),
            cap=(self.config.get("sampling") or {}).get("max_new_tokens"),
            collapse_step=(self.status or {}).get("collapse_step"),
            length_error=first_last_errors(self.metrics, "mean_response_len"),
            reward_error=first_last_errors(self.metrics, "verifier_reward"),
            window=len(found[0]) if (found := windows(self.metrics, "verifier_reward")) else None,
        )

    def pressure(self) -> tuple[float, float] | str:
        """Medians over the logged steps of (pressure_normalised, pressure_retained) (a collapsed run: up to
        its collapse); a median, since single steps reach hundreds of times the typical value."""
        if reason := self.dynamics_reason():
            return reason
        values = [series(self.metrics, key)[1] for key in ("pressure_normalised", "pressure_retained")]
        if not all(values):
            return "no pressure_normalised / pressure_retained in metrics.jsonl"
        return statistics.median(values[0]), statistics.median(values[1])

    def separation(self, points: int) -> dict[str, Any] | str:
        """A scoring pass's J_H curve (horizon.json) with Figure 1(b)'s view of it: "shown", `points` horizons even
        in H^(1/3) and the peak, "at", J_H there, and "peak", (H, J_H) of the maximum of the full curve; or why
        there is none."""
        curve = self.horizon
        if self.state != "finished" or curve is None:
            return self.describe() if self.state != "finished" else "no horizon.json (a scoring pass writes it)"
        if not curve["horizons"] or curve["values"] is None:
            return f"J_H undefined: no prompt has both correct and incorrect responses ({curve['prompts']} prompts)"
        at = dict(zip(curve["horizons"], curve["values"], strict=True))
        peak = curve["horizons"][int(np.argmax(curve["values"]))]
        shown = sorted(set(horizon_grid(curve["horizons"][-1], points)) | {peak})
        return {**curve, "shown": shown, "at": [at[h] for h in shown], "peak": (peak, at[peak])}


def started(run: Run) -> datetime | None:
    """When the run's first session began (status.json `started`, UTC; None: not recorded or not run)."""
    value = (run.status or {}).get("started")
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def began_at(runs: list[Run]) -> datetime | None:
    """The earliest start among `runs` (None: none recorded)."""
    return min((t for run in runs if (t := started(run)) is not None), default=None)


DYNAMICS = ("mean_response_len", "verifier_reward", "pearson_score_len")
HOW = ("seed", "run_id", "grid", "tracking", "backend.threads", "backend.numerics")  # how a run ran, not its setting


def how(key: str) -> bool:
    """Whether the dotted config key says HOW a run ran rather than what it computes."""
    return any(key == h or key.startswith(h + ".") for h in HOW)


def setting_key(config: dict[str, Any]) -> str:
    """The hash runs of one setting share: the config but what HOW names."""
    return settings_hash(dotted_to_nested({key: v for key, v in nested_to_dotted(config).items() if not how(key)}))


def departures(recorded: dict[str, Any], registered: dict[str, Any] | None) -> tuple[str, ...]:
    """`key=value` for each setting a run's recorded config holds otherwise than its grid entry's registered config
    (the entry resolved without overrides); keys one side lacks (a setting added to the schema since) are not
    compared, nor HOW a run ran. () for the registered setting, or where the entry no longer resolves."""
    if registered is None:
        return ()
    flat, planned = nested_to_dotted(recorded), nested_to_dotted(registered)
    return tuple(f"{k}={num(v)}" for k, v in flat.items() if k in planned and planned[k] != v and not how(k))


def edited_run_files(differs: tuple[str, ...], set_by: Any) -> tuple[str, ...]:
    """'set by the edited run file <path>' for each edited run file that set one of the `key=value` departures
    `differs`, as the run's status.json recorded who set its keys (`set_by`: dotted key -> origin; () without it)."""
    if not isinstance(set_by, dict):
        return ()
    origins = [set_by.get(item.split("=", 1)[0]) for item in differs]
    files = dict.fromkeys(o for o in origins if isinstance(o, str) and o.startswith(EDITED_RUN_FILE))
    return tuple(f"set by the {origin}" for origin in files)


@dataclass
class Setting:
    """The runs of one setting (same config but naming, seed, threads and numerics mode), in the order read."""

    runs: list[Run]
    departures: tuple[str, ...] = ()  # how it differs from its grid entry's registered setting (none: it is that one)
    elsewhere: list[tuple[Run, str]] = field(default_factory=list)  # runs of a grid's own seed of this registered
    # setting that ran another one (each with how it differs): named in this setting's Missing lines, never counted

    config = property(lambda self: self.runs[0].config)
    registered = property(lambda self: not self.departures)
    pairing = property(lambda self: str(self.config.get("pairing")))
    method = property(lambda self: self.config.get("method"))
    grids = property(lambda self: {run.grid for run in self.runs})

    record = property(lambda self: METHODS.get(str(self.method)))  # gropd/credit.py's record (None: no method)

    def value(self, key: str) -> Any:
        """The config's value at a dotted key (None when absent)."""
        return reduce(lambda section, part: (section or {}).get(part), key.split("."), self.config)

    def knob(self, name: str) -> float | None:
        """gropd.lam or gropd.gamma where the method reads it (its record's knobs), else None."""
        return self.value(f"gropd.{name}") if self.record and self.record.reads(f"gropd.{name}") else None

    @property
    def label(self) -> str:
        """'GR-OPD (λ=0.25, γ=0.99)', 'vanilla OPD (train.steps=200)': method, its knobs, the grid's other values."""
        knobs = self.record.knobs if self.record else ()
        parts = [f"{symbol}={num(v)}" for key, symbol in knobs if number(v := self.value(key)) is not None]
        parts += [f"{k}={num(v)}" for k, v in self.runs[0].entry.values.items() if k not in SHOWN]
        name = self.record.label if self.record else str(self.method)
        unregistered = f" [not the registered setting: {', '.join(self.departures)}]" if self.departures else ""
        return name + (f" ({', '.join(parts)})" if parts else "") + unregistered

    def seeds(self) -> dict[int, Run]:
        """One run per seed, in seed order: of twins the furthest along, then the original over a copy."""
        best: dict[int, Run] = {}
        for run in self.runs:
            if run.seed not in best or run.preference > best[run.seed].preference:
                best[run.seed] = run
        return dict(sorted(best.items()))

    def collect(self, value) -> tuple[dict[int, Any], list[str]]:
        """Per seed `value(run)` where it is not a reason (str), and the missing lines of the others (and of the
        seeds whose run ran another setting: `elsewhere`)."""
        results = {seed: (run, value(run)) for seed, run in self.seeds().items()}
        lines = [missing(run, result) for run, result in results.values() if isinstance(result, str)]
        lines += [
            missing(run, f"ran another setting than the registered one ({differs}); it is not counted here")
            for run, differs in self.elsewhere
            if run.seed not in results
        ]
        lines += self.hidden_broken()
        return {seed: result for seed, (_, result) in results.items() if not isinstance(result, str)}, lines

    def hidden_broken(self) -> list[str]:
        """A Missing line for each broken record whose seed a twin speaks for (seeds() prefers the twin): the seed is
        counted from the twin, and the broken record is named as `status` names it, never passed over."""
        chosen = self.seeds()
        return [
            missing(run, f"{run.describe()}; seed {run.seed} is counted from its twin `{chosen[run.seed].run_id}`")
            for run in self.runs
            if run.state == "broken" and chosen.get(run.seed) is not run
        ]


class Evidence:
    """Every run of the grids an artefact asks for, read once per build from `results/<profile>/`; `results_root` as
    given (errors name it so), `results_name` and `profile_results` as the project names them (project_path: what
    artefacts print, and where runs are read from)."""

    def __init__(
        self, profile: str, results_root: Path, experiments_dir: Path, settings: ReportSettings, halfway: bool = False
    ):
        self.profile, self.results_root, self.experiments_dir = profile, results_root, experiments_dir
        self.results_name = project_path(results_root)
        self.report = settings
        self.manifests = load_manifests(experiments_dir)
        self.suites: dict[str, dict[str, Any]] = self.manifests.suites.get(profile) or {}
        self._runs: dict[str, list[Run]] = {}
        self.registered_seeds = False  # True: only the seeds experiments/registration.yaml registered (variant)
        self.first = False  # True: the registration's entries as first registered (variant)
        self.halfway = halfway  # the instability rule's halfway length arm (world 5: report/long_horizon.py)

    profile_results = property(lambda self: self.results_name / self.profile)

    @cached_property
    def registration(self) -> Registration:
        """experiments/registration.yaml (read when a claim needs it: other artefacts do not)."""
        return load_registration(self.experiments_dir)

    def variant(self, registered_seeds: bool, first: bool = False) -> Evidence:
        """The same runs (read once, shared), with only the registered seeds of each grid, and/or judged by the
        registration's entries as first registered."""
        other = Evidence.__new__(Evidence)
        other.__dict__ |= {k: v for k, v in self.__dict__.items() if k != "all_settings"}
        other.registered_seeds, other.first = registered_seeds, first
        return other

    def runs(self, grid: str) -> list[Run]:
        """The grid's runs in grid order ([] for a grid experiments/ does not have), with extra seeds
        (`--seeds N`) where results/ holds them; of the registered seeds only in a `registered_seeds` variant."""
        if grid not in self._runs:
            self._runs[grid] = [] if grid not in grid_names(self.experiments_dir) else self._read(grid)
        if not self.registered_seeds:
            return self._runs[grid]
        began = began_at(self._runs[grid])
        return [
            run
            for run in self._runs[grid]
            if (seeds := self.registration.registered_seeds(grid, self.matched_run(run), began)) is None
            or run.seed in seeds
        ]

    def matched_run(self, run: Run) -> bool:
        pairing = run.config.get("pairing") or run.entry.values.get("pairing")
        return pairing not in self.manifests.pairings or self.matched(str(pairing))

    def _read(self, grid: str) -> list[Run]:
        spec = load_grid(grid, self.experiments_dir)
        own = set(self.own_seeds(grid))
        runs = []
        for entry in expand_grid(spec, sorted(own | seeds_on_disk(self.profile_results, grid, own))):
            path = self.profile_results / entry.run_id
            if entry.values["seed"] in own or path.is_dir():
                runs.append(self._read_run(entry, path))
        return runs

    def _read_run(self, entry: RunEntry, path: Path) -> Run:
        run_dir = RunDir(path)
        status = run_dir.read_status()
        if status is None:
            try:
                config = self.resolve(entry)
            except ConfigError as err:  # a grid entry this profile cannot run: its own values label it
                return Run(entry, path, None, dotted_to_nested(entry.values), unresolved=str(err))
            return Run(entry, path, None, config)
        run_dir.check(status)
        config, summary, metrics = run_dir.read_config(), run_dir.read_summary(), run_dir.read_metrics()
        horizon = run_dir.read_horizon()
        broken = run_dir.record_problem(status, config, metrics, summary, horizon, planned_k(config, self.suites)) or ""
        return Run(entry, path, status, config, summary, metrics, horizon, broken=broken)

    @cached_property
    def all_settings(self) -> list[Setting]:
        """The settings of every grid's runs, in first-seen order (grids by name), each pooling its runs."""
        groups: dict[str, list[Run]] = {}
        for grid in grid_names(self.experiments_dir):
            for run in self.runs(grid):
                believed = run.config if not run.broken else self.registered(run) or run.config  # (a broken record
                groups.setdefault(setting_key(believed), []).append(run)  # counts where its grid entry puts it)
        settings = {key: Setting(runs, self.departures(runs)) for key, runs in groups.items()}
        for s in [s for s in settings.values() if s.departures]:
            for run in s.runs:  # a grid's own seed run otherwise: its registered setting names it
                home = settings.get(setting_key(self.registered(run) or run.config))
                if home is not None and home is not s and run.seed in self.own_seeds(run.grid):
                    home.elsewhere.append((run, ", ".join(s.departures)))
        return list(settings.values())

    def own_seeds(self, grid: str) -> list[int]:
        """The seeds a grid names itself (not `--seeds N`'s extra ones)."""
        return list(load_grid(grid, self.experiments_dir).get("seeds", [0]))

    def departures(self, runs: list[Run]) -> tuple[str, ...]:
        """How the setting of `runs` differs from their grid entry's registered one (a broken record says nothing),
        each edited run file that set a difference named after them (status.json's `set_by`)."""
        sound = [run for run in runs if not run.broken]
        if not sound:
            return ()
        differs = departures(sound[0].config, self.registered(sound[0]))
        return differs + edited_run_files(differs, (sound[0].status or {}).get("set_by"))

    def resolve(self, entry: RunEntry) -> dict[str, Any]:
        """The registered config of a grid entry: the entry resolved from the grids and the profile alone, without
        overrides and without its run file (experiments/runs/ is the user's to edit: it never changes what a grid
        registered). ConfigError where it does not resolve in this profile."""
        return resolve_run(None, self.profile, self.manifests, [], entry.values).model_dump(mode="json")

    def registered(self, run: Run) -> dict[str, Any] | None:
        """The registered config of the run's grid entry (resolve; None where it no longer resolves in this
        profile)."""
        try:
            return self.resolve(run.entry)
        except ConfigError:
            return None

    def setting_of(self, run: Run) -> Setting:
        return next(s for s in self.all_settings if any(r is run for r in s.runs))

    def settings(self, *grids: str) -> list[Setting]:
        """The settings with a run in `grids` (every grid when none is named), in the order their runs come, each
        with the runs of `grids` first (they speak for a seed its twins in other grids also hold)."""
        asked = grids or grid_names(self.experiments_dir)
        runs = [run for grid in asked for run in self.runs(grid)]
        found = {id(s): s for s in map(self.setting_of, runs)}.values()
        return [
            Setting(sorted(s.runs, key=lambda run: run.grid not in asked), s.departures, s.elsewhere) for s in found
        ]

    def title(self, pairing: str) -> str:
        return str((self.manifests.pairings.get(pairing) or {}).get("title", pairing))

    def matched(self, pairing: str) -> bool:
        """Teacher and student in the same mode (thinking pattern)."""
        record = self.manifests.pairings[pairing]
        return record["teacher"]["mode"] == record["student"]["mode"]

    def seed_ids(self, run: Run, seeds: int) -> list[str]:
        """The run ids of seeds 0..seeds-1 of `run`'s grid entry (seed 0 first)."""
        own = {k: v for k, v in run.entry.values.items() if k not in ("seed", "run_id")}
        entries = expand_grid(load_grid(run.grid, self.experiments_dir), list(range(seeds)))
        return [e.run_id for e in entries if {k: v for k, v in e.values.items() if k not in ("seed", "run_id")} == own]
