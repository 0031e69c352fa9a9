"""`extract tune`: the job's documents under a small grid of lever settings, each scored as `extract eval` scores.

The levers are the ones the measurements found to move quality (docs/quality.md): grounding mode, how the
schema is shown in the prompt, few-shot examples on or off, `presence_penalty` and the grammar-only string
bound. The search is one lever at a time: starting from the job as written, each lever's values are tried
with the others at the best found so far, and the best (F1, then docs/s) is kept. Settings that give the job
the same output hash decode the same requests, so each is run once.

Before them comes reach (pipeline.tools.evaluate.reach): the fields whose gold values the job's grammar allows
less than FREE_BELOW of the time are tried marked `x-grounded: false`, as the first lever. Each setting is
compared with the best before it by a paired bootstrap over the documents (pipeline.tools.tune_stats), so the
table says when a difference is within what the gold set's size can tell apart; tune.md also gives each
setting's per-field F1.

Every setting runs in this process on ONE engine, started once: every lever is a per-request setting (a
prompt, a grammar, sampling parameters), so nothing needs a new engine. No output is written to the job's
output; the result is a table (tune.md, tune.json) and the best settings as a YAML snippet (tune.yaml) to
paste into the job.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.config import ConfigError, LoadedConfig, load_config
from pipeline.tools.evaluate import EvalOptions, score
from pipeline.tools.evaluate.inputs import read_documents
from pipeline.tools.evaluate.output import schema_value
from pipeline.tools.evaluate.reach import Reach, job_reach
from pipeline.tools.tune_stats import (
    FREE_BELOW,
    Counts,
    Difference,
    bootstrap_f1_diff,
    f1_of,
    low_reach_fields,
    mark_free,
)

# The levers, in the order they are searched, and the values tried (the job's own value is always tried).
WINDOW_TOKENS = "input.window_tokens"
LEVERS: dict[str, tuple[Any, ...]] = {
    # Windows of at most N document tokens (a long document's windows, or a shorter one cut to read in smaller
    # pieces); `auto`: each document whole where it fits. A value no document tuned on is longer than decodes what
    # `auto` decodes, and is not run (`Tuner.same_as_auto`): on short-document jobs the lever costs nothing.
    WINDOW_TOKENS: ("auto", 512, 1024, 2048),
    "schema_policy.grounding": ("auto", "marked", "off"),
    "examples": ("job", False),
    "prompt_schema": ("auto", "json", "fields", "none"),
    "model.sampling.presence_penalty": (0.0, 0.5, 1.0),
    "schema_policy.max_string_length": (None, "auto", 64),
}
# Not a config key: the fields marked `x-grounded: false` in the schema (tune_stats.mark_free), tried first where
# the gold's reach of some field is under FREE_BELOW.
FREE = "x-grounded: false"


@dataclass
class Trial:
    setting: dict[str, Any]
    output_hash: str
    f1: float | None = None
    precision: float | None = None
    recall: float | None = None
    rows: int = 0
    dead_letters: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    documents: int = 0
    fields: dict[str, float | None] = field(default_factory=dict)  # per-field F1
    counts: dict[str, Counts] = field(default_factory=dict)  # per document: (gold, predicted, correct) leaves
    versus: Difference | None = None  # against the best setting before it (a paired bootstrap)

    @property
    def docs_per_s(self) -> float | None:
        return self.documents / self.seconds if self.seconds else None

    def key(self) -> tuple[float, float]:
        return (self.f1 or 0.0, self.docs_per_s or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "output_hash": self.output_hash, "f1": self.f1,
                "precision": self.precision, "recall": self.recall, "rows": self.rows,
                "dead_letters": self.dead_letters, "seconds": round(self.seconds, 2),
                "docs_per_s": round(self.docs_per_s, 3) if self.docs_per_s else None, "fields": self.fields,
                "versus_best_before": None if self.versus is None else self.versus.__dict__}


def job_value(loaded: LoadedConfig, lever: str) -> Any:
    """The job's own value of `lever`, as the grid writes it."""
    if lever == FREE:
        return ()
    if lever == "examples":
        return "job" if loaded.config.examples is not False else False
    node: Any = loaded.config
    for part in lever.split("."):
        node = getattr(node, part, None)
    return 0.0 if lever.endswith("presence_penalty") and node is None else node


def overrides_for(setting: dict[str, Any]) -> dict[str, Any]:
    """Config overrides (`--set` keys) for a setting; `examples: job` keeps the job's examples."""
    return {k: v for k, v in setting.items() if k != FREE and not (k == "examples" and v == "job")}


class Tuner:
    """One engine, many settings: each setting's documents decoded and scored against the gold records."""

    def __init__(self, loaded: LoadedConfig, overrides: dict[str, Any], golds: dict[str, dict[str, Any]],
                 limit: int | None, options: EvalOptions) -> None:
        """`loaded` is the job as written (its config file with `overrides`); each setting reloads that file."""
        self.config = loaded.path
        self.base = dict(overrides)
        self.golds = golds
        self.options = options
        self.loaded = loaded
        self.ids, self.texts, self.schemas = read_documents(self.loaded, set(golds), limit)
        self.engine: Any = None
        self.engine_starts = 0
        self.longest_tokens: int | None = None  # the longest document's tokens (its prompt as a user message)
        self.trials: dict[str, Trial] = {}
        self.reach = self._reach()

    def _reach(self) -> Reach:
        """The share of each field's gold values the job's grammar allows, on the documents tuned on."""
        documents = {i: t for i, t in zip(self.ids, self.texts, strict=True) if isinstance(t, str)}
        schemas = {} if self.schemas is None else {
            i: s for i, v in zip(self.ids, self.schemas, strict=True) if (s := schema_value(self.loaded, v))}
        return job_reach(self.loaded, {i: self.golds[i] for i in documents}, documents, schemas,
                         self.options.tolerance)

    def free_lever(self) -> dict[str, tuple[Any, ...]]:
        """The fields to try as `x-grounded: false` (their reach under FREE_BELOW), as a lever; none for per-row
        schemas (each row's own: nothing to mark)."""
        low = low_reach_fields(self.reach.fields())
        return {FREE: (tuple(low),)} if low and not self.loaded.contract.per_row else {}

    def _loaded(self, setting: dict[str, Any]) -> LoadedConfig:
        """The job under `setting`: its config overrides, and its fields marked x-grounded: false."""
        loaded = load_config(self.config, {**self.base, **overrides_for(setting)})
        if setting.get(FREE):
            json_schema, missing = mark_free(loaded.contract.json_schema, list(setting[FREE]))
            if missing:
                raise ConfigError(f"{FREE}: no field {', '.join(missing)} in the schema")
            loaded.contract = dataclasses.replace(loaded.contract, json_schema=json_schema)
        return loaded

    def start_engine(self) -> None:
        """The job's engine from the actor's factory (`workers.actor.start_engine`: vLLM, or the simulated engine
        under `model.path: simulated`), sized for the documents tuned on, at most the job's sequences in flight."""
        from pipeline.dataflow import actor_env, build_spec
        from pipeline.stage_config import ActorConfig
        from workers.actor import SIMULATED, start_engine
        from workers.engine import has_accelerator

        cfg = self.loaded.config
        for key, value in actor_env(cfg.workers.gpus_per_actor).items():  # the same set-up as an actor's
            os.environ.setdefault(key, value)
        spec = build_spec(ActorConfig.of(self.loaded), "tune")
        spec = dataclasses.replace(spec, sequences_in_flight=max(1, min(len(self.ids), spec.sequences_in_flight)))
        self.engine = start_engine(spec, spec.model_path != SIMULATED and has_accelerator())
        self.engine_starts += 1

    def trial(self, setting: dict[str, Any]) -> Trial:
        """The setting's scores (run once per output hash)."""
        loaded = self._loaded(setting)
        if not (loaded.config.model.engine_kwargs == self.loaded.config.model.engine_kwargs
                and loaded.model_path == self.loaded.model_path
                and loaded.config.model.max_model_len == self.loaded.config.model.max_model_len):
            raise ConfigError(f"{setting}: a lever of the engine itself (model.path, max_model_len, engine_kwargs) "
                              "needs an engine per setting; tune searches per-request levers only")
        known = self.trials.get(loaded.output_hash)
        if known is not None:
            return known
        outcomes, seconds = self._decode(loaded)
        rows = {i: o.record for i, o in zip(self.ids, outcomes, strict=True) if o.record is not None}
        dead = {i: o.reason or "dead_letter" for i, o in zip(self.ids, outcomes, strict=True) if o.record is None}
        golds = {i: self.golds[i] for i in self.ids}
        default = loaded.contract.json_schema if not loaded.contract.per_row else None
        scores = score(golds, rows, dead, lambda _: default, self.options)
        overall = scores.summary()["overall"]
        f1 = overall["f1"] if overall["f1"] is not None or overall["recall"] is None else 0.0  # no rows: F1 0
        trial = Trial(dict(setting), loaded.output_hash, f1, overall["precision"], overall["recall"],
                      len(rows), dict(Counter(dead.values())), seconds, len(self.ids),
                      {path: f1_of(s.gold, s.predicted, s.correct) for path, s in sorted(scores.fields.items())},
                      {d.doc_id: (d.gold, d.predicted, d.correct) for d in scores.documents})
        self.trials[loaded.output_hash] = trial
        return trial

    def _decode(self, loaded: LoadedConfig) -> tuple[list[Any], float]:
        from pipeline.dataflow import build_spec
        from pipeline.stage_config import ActorConfig
        from workers.extractor import BatchExtractor

        spec = build_spec(ActorConfig.of(loaded), "tune")
        self.engine.use_sampling(spec.sampling, spec.grammar_bounds)  # this setting's, not the last one's
        extractor = BatchExtractor(self.engine, spec, min(spec.max_model_len, self.engine.max_model_len))
        extractor.prepare()
        started = time.perf_counter()
        outcomes = extractor.outcomes(self.ids, self.texts, self.schemas)
        return outcomes, time.perf_counter() - started

    def same_as_auto(self, lever: str, value: Any, tried: tuple[Any, ...]) -> str | None:
        """Why a window size N is not run: no document tuned on has more than N tokens, so it decodes what `auto`
        (tried too) decodes. None: run it."""
        if lever != WINDOW_TOKENS or not isinstance(value, int) or "auto" not in tried:
            return None
        if self.longest_tokens is None:
            self.longest_tokens = max((len(self.engine.prompt_token_ids(t)) for t in self.texts
                                       if isinstance(t, str)), default=0)
        if self.longest_tokens > value:
            return None
        return f"not run: no document is longer than {value} tokens (the longest, {self.longest_tokens}): as auto"

    def search(self, levers: dict[str, tuple[Any, ...]] = LEVERS, report: Any = None) -> Trial:
        """One lever at a time, from the job as written (first the fields grounding forbids most of their gold,
        as x-grounded: false); returns the best trial. Each trial is compared with the best before it."""
        levers = {**self.free_lever(), **levers}
        best_setting = {lever: job_value(self.loaded, lever) for lever in levers}
        best = self.trial(best_setting)
        if report:
            report(best)
        for lever, values in levers.items():
            for value in dict.fromkeys((*values, best_setting[lever])):
                if value == best_setting[lever]:
                    continue
                candidate = {**best_setting, lever: value}
                if note := self.same_as_auto(lever, value, (*values, best_setting[lever])):
                    if report:
                        report(Trial(candidate, "-"), note)
                    continue
                try:
                    trial = self.trial(candidate)
                except ConfigError as exc:  # e.g. examples that this grounding refuses: not a setting to take
                    if report:
                        report(Trial(candidate, "-", dead_letters={"config": 1}), str(exc))
                    continue
                if trial is not best:
                    trial.versus = bootstrap_f1_diff(trial.counts, best.counts)
                if report:
                    report(trial)
                if trial.key() > best.key():
                    best, best_setting = trial, candidate
        return best


def snippet(loaded: LoadedConfig, best: Trial) -> str:
    """The best settings as YAML to paste into the job (only the levers it changes)."""
    changed = {k: v for k, v in best.setting.items() if v != job_value(loaded, k) and k != FREE}
    free = "".join(f"# mark {name} x-grounded: false (in Pydantic: json_schema_extra={{'x-grounded': False}}): "
                   f"grounding refused its gold values\n" for name in best.setting.get(FREE) or ())
    tree: dict[str, Any] = {}
    for dotted, value in changed.items():
        node = tree
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    head = f"# extract tune: F1 {best.f1 if best.f1 is None else round(best.f1, 3)} on {best.documents} documents\n"
    head += free
    if not tree:
        return head + ("" if free else "# the job's own settings scored best: nothing to change\n")
    return head + yaml.safe_dump(tree, sort_keys=False, default_flow_style=False)


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _setting_text(setting: dict[str, Any]) -> str:
    return ", ".join(f"{FREE} on {', '.join(v) or 'none'}" if k == FREE else f"{k.rsplit('.', 1)[-1]}={v}"
                     for k, v in setting.items())


def table_line(trial: Trial, note: str = "") -> str:
    dead = ", ".join(f"{r} {n}" for r, n in sorted(trial.dead_letters.items())) or "none"
    versus = "-" if trial.versus is None else trial.versus.line()
    return (f"| {_setting_text(trial.setting)} | {_f(trial.f1)} | {_f(trial.precision)} | {_f(trial.recall)} | "
            f"{dead} | {_f(trial.docs_per_s)} | {versus} |" + (f" {note}" if note else ""))


TABLE_HEAD = ("| setting | F1 | precision | recall | dead letters | docs/s | against the best before it |\n"
              "|---|---|---|---|---|---|---|")


def reach_lines(reach: Reach) -> list[str]:
    """Each field's reach on the gold, and what tune does about it."""
    lines = ["| field | gold values | allowed by the grammar | reach | tune |", "|---|---|---|---|---|"]
    for path, s in reach.fields().items():
        low = s["reach"] is not None and s["reach"] < FREE_BELOW
        lines.append(f"| {path} | {s['gold']} | {s['reached']} | {_f(s['reach'])} | "
                     f"{f'tried as {FREE} (reach under {FREE_BELOW})' if low else '-'} |")
    return lines


def field_lines(trials: list[Trial]) -> list[str]:
    """Per-field F1, a column per setting (numbered as the settings table lists them)."""
    paths = sorted({p for t in trials for p in t.fields})
    lines = ["| field | " + " | ".join(f"#{i}" for i in range(1, len(trials) + 1)) + " |",
             "|---|" + "---|" * len(trials)]
    lines += [f"| {p} | " + " | ".join(_f(t.fields.get(p)) for t in trials) + " |" for p in paths]
    return lines


def best_against_job(trials: list[Trial], best: Trial) -> str:
    """Whether the best setting's lead over the job's own is more than the gold set's size can tell apart."""
    own = trials[0] if trials else best
    if own is best:
        return "The job's own settings scored best."
    versus = bootstrap_f1_diff(best.counts, own.counts)
    return "Best against the job's own settings: " + ("-" if versus is None else versus.line()) + (
        "; the job's own settings are as good as far as this gold set can tell" if versus and versus.within_noise
        else "")


def render(loaded: LoadedConfig, trials: list[Trial], best: Trial, reach: Reach | None = None) -> str:
    lines = [f"# extract tune: {loaded.config.name}", "", f"{best.documents} documents with gold; one engine; "
             "levers searched one at a time from the job's own settings.", ""]
    if reach is not None:
        lines += ["Reach: the share of each field's gold values the job's grammar allows (grounding).", "",
                  *reach_lines(reach), ""]
    lines += [TABLE_HEAD, *(table_line(t) for t in trials), "", "Per-field F1, by setting (#1 is the first row):",
              "", *field_lines(trials), "", best_against_job(trials, best)]
    lines += ["", "Best:", "", "```yaml", snippet(loaded, best).rstrip(), "```", ""]
    return "\n".join(lines)


def write_results(out: Path, loaded: LoadedConfig, trials: list[Trial], best: Trial, engine_starts: int = 1,
                  reach: Reach | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.json").write_text(json.dumps({"job": str(loaded.path), "engine_starts": engine_starts,
                                               "reach": reach.summary() if reach is not None else None,
                                               "best": best.to_dict(), "against_job": best_against_job(trials, best),
                                               "trials": [t.to_dict() for t in trials]}, indent=2, default=str))
    (out / "tune.md").write_text(render(loaded, trials, best, reach))
    (out / "tune.yaml").write_text(snippet(loaded, best))
    return out / "tune.yaml"
