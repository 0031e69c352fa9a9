"""What a person reads at the end of a run: a one-screen summary, and the per-day table of a backfill.

The summary's paths and suggested commands name the output the run really wrote (after `--output`,
`--set` and `--date`), so that copying a command looks at this run and not at the config's default output.
Under a Ray job (`ray job submit`, `extract submit`) the config sits in Ray's temporary working dir; the
output is named as it is (S3 or an absolute path), and an output inside that temporary dir is flagged.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from pipeline.costs import usage_lines
from pipeline.output.manifest import RunManifest
from workers.secrets import looks_secret, redact
from workers.stages import stage_lines
from workers.windows import windows_text

RAY_TEMP_MARKERS = ("/runtime_resources/", "/ray/session_")  # Ray's per-job working dir and session folders

# Dead-letter reasons a retry can recover, each with the settings the hint changes (a retry under the run's own
# settings decodes the same output again). The others cannot be retried into rows: empty_input, invalid_input
# and input_too_long are in the input; schema_invalid, schema_unsupported, type_overflow and validator_error in
# the schema or its code.
RETRY_HINTS: dict[str, tuple[str, ...]] = {
    "truncated": ("model.max_tokens",),  # twice the run's budget
    "semantic_invalid": ("model.retry.attempts=3",),  # the checks' errors fed back to the model
    "schema_violation": ("model.retry.attempts=3",),
    "invalid_json": ("model.retry.attempts=3",),
    "engine_error": (),  # transient: the same settings may succeed
    "actor_crash": (),
    "validator_timeout": (),
}


def in_ray_temp(path: str) -> bool:
    return any(marker in path for marker in RAY_TEMP_MARKERS)


def _config_arg(manifest: RunManifest, config_arg: str | None) -> str:
    """The config as the user named it (relative to where they ran the command), else as recorded."""
    return config_arg or manifest.config_path


def output_flags(manifest: RunManifest, sets: Sequence[str] | None) -> list[str]:
    """`--set` flags that make a later command read this run's output: the user's own overrides that name
    where output and its storage live, and the output actually written."""
    keep = [s for s in sets or [] if s.split("=", 1)[0].startswith(("storage.", "output."))
            and not s.startswith("output.uri=")]
    return set_flags(keep) + ["--set", f"output.uri={manifest.output_uri}"]


def set_flags(items: Sequence[str]) -> list[str]:
    """`--set KEY=VALUE` for each item. A hint is printed (and, under a Ray job, kept in its logs): a secret is
    masked, never repeated."""
    flags: list[str] = []
    for item in items:
        key, _, value = item.partition("=")
        flags += ["--set", f"{key}={redact({key: value})[key]}" if looks_secret(key, value) else item]
    return flags


def commands(manifest: RunManifest, config_arg: str | None = None, sets: Sequence[str] | None = None
             ) -> dict[str, str]:
    config = _config_arg(manifest, config_arg)
    flags = output_flags(manifest, sets)
    out = manifest.output_uri
    days = _days(manifest)
    found = {
        "query": shlex.join(["extract", "query", config, *flags,
                             "SELECT reason, count(*) FROM dead_letters GROUP BY 1"]),
        "report": shlex.join(["extract", "report", out, "--run", manifest.run_id]),
    }
    retry = retry_command(manifest, config, days)
    if retry is not None:
        found["retry"] = shlex.join([*retry, *job_flags(sets, retry), *flags])
    return found


def job_flags(sets: Sequence[str] | None, hint: Sequence[str]) -> list[str]:
    """The run's other `--set` overrides (its model, prompt, schema policy…), so that a retry hint redoes the job
    that ran and not the file's; those the hint sets itself, and where the output lives (`output_flags`), left
    out. A secret is masked, never repeated."""
    hinted = {item.split("=", 1)[0] for item in hint if "=" in item}
    return set_flags([item for item in sets or [] if item.split("=", 1)[0] not in hinted
                      and not item.startswith(("storage.", "output."))])


def retry_command(manifest: RunManifest, config: str, days: list[str]) -> list[str] | None:
    """`extract retry` for the commonest dead-letter reason a retry can recover, with the settings that give it a
    chance; None when no dead letter of the run can be retried into a row."""
    reasons = sorted(((r, n) for r, n in manifest.dead_letters_by_reason.items() if r in RETRY_HINTS),
                     key=lambda kv: -kv[1])
    if not reasons:
        return None
    reason = reasons[0][0]
    retry = ["extract", "retry", config, "--reason", reason]
    for setting in RETRY_HINTS[reason]:
        if setting == "model.max_tokens":
            setting = f"model.max_tokens={2 * (manifest.max_tokens or 512)}"
        retry += ["--set", setting]
    if len(days) == 1:
        retry += ["--date", days[0]]
    elif days:
        retry += ["--start", days[0], "--end", days[-1]]
    return retry


def _days(manifest: RunManifest) -> list[str]:
    """The dated partitions the run wrote (`--date`, a backfill's range), in order."""
    return sorted(str(p["partition"]) for p in manifest.partitions
                  if p.get("status") == "committed" and str(p.get("partition")) != "all")


def render_summary(manifest: RunManifest, config_arg: str | None = None, sets: Sequence[str] | None = None) -> str:
    total = manifest.input_rows or 1
    t = manifest.timings
    lines = [
        f"run {manifest.run_id}: {manifest.status}",
        f"  input      {manifest.input_rows} documents from {manifest.input_uri}",
        f"  rows       {manifest.rows} ({100 * manifest.rows / total:.1f}%)",
        f"  dead       {manifest.dead_letters} ({100 * manifest.dead_letters / total:.1f}%)",
    ]
    for reason, count in sorted(manifest.dead_letters_by_reason.items(), key=lambda kv: -kv[1]):
        lines.append(f"    {reason:<18} {count}")
    for p in manifest.partitions:
        if p["status"] != "committed":
            lines.append(f"  partition  {p['partition']}: {p['status']} ({p['error']})")
        elif p.get("units_resumed"):
            lines.append(f"  partition  {p['partition']}: resumed {p['units_resumed']} of {p['units']} units "
                         "from staging")
    if manifest.error:
        lines.append(f"  error      {manifest.error}")
    timing = ", ".join(
        f"{label} {t[key]:.1f}s"
        for label, key in (("engine init", "engine_init_s"), ("schema compile", "schema_compile_s"),
                           ("generation", "generation_s"), ("total", "total_s"))
        if t.get(key) is not None
    )
    lines.append("  time       " + timing)
    lines += usage_lines(manifest.extra.get("usage"), t, manifest.input_rows)
    windows = windows_text(manifest.extra.get("windows"))  # windows per document (workers.windows)
    lines += [f"  windows    {windows}"] if windows else []
    lines += [f"  warning    {w}" for w in manifest.extra.get("field_warnings") or []]
    lines += ["  cpu        " + line for line in stage_lines(manifest.extra.get("stage_cpu_ms") or {})]
    out = manifest.output_uri
    days = _days(manifest)
    where = f"/dt={days[0]}" if len(days) == 1 else ""
    lines += [
        f"  output     {out}/rows{where}  {out}/dead_letters{where}",
        f"  manifest   {out}/_runs/{manifest.run_id}.json",
    ]
    if in_ray_temp(out):
        lines.append("  warning    this output is inside Ray's temporary working dir and goes with the job: set "
                     "output.uri to s3://… or an absolute path on shared storage")
    cmds = commands(manifest, config_arg, sets)
    lines += [f"  query      {cmds['query']}", f"  report     {cmds['report']}"]
    if "retry" in cmds:
        lines.append(f"  retry      {cmds['retry']}")
    return "\n".join(lines)


def render_backfill_table(manifest: RunManifest) -> str:
    header = f"{'day':<12} {'status':<10} {'rows':>8} {'dead':>8} {'seconds':>9}  note"
    lines = [header, "-" * len(header)]
    for p in manifest.partitions:
        note = p.get("error") or (f"resumed {p['units_resumed']}/{p['units']} units" if p.get("units_resumed") else "")
        lines.append(f"{p['partition']:<12} {p['status']:<10} {p['rows']:>8} {p['dead_letters']:>8} "
                     f"{p['seconds']:>9.1f}  {note}")
    return "\n".join(lines)
