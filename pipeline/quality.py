"""The quality gate of a scheduled run: `output.max_dead_letter_rate` (or `--max-dead-letter-rate`),
`output.max_truncated_rate` and `output.min_rows`.

A run that misses the bar still commits: dead letters are data, and the rows that passed are good rows.
It then records why in its run manifest (`alert`), prints it, and `extract run` exits 4
(`exit_codes.QUALITY_ALERT`), so a scheduler or `ray job submit` sees a failure.
"""

from __future__ import annotations

from typing import Any


def quality_alert(manifest: Any, output: Any) -> str | None:
    """Why the run misses the output's quality bar (one line, every reason), or None when it meets it.
    Rates are over the documents this run processed; a run that processed none is not judged on rates."""
    reasons = []
    processed = manifest.rows + manifest.dead_letters
    if processed:
        rate = manifest.dead_letters / processed
        if output.max_dead_letter_rate is not None and rate > output.max_dead_letter_rate:
            reasons.append(f"dead-letter rate {rate:.3f} ({manifest.dead_letters} of {processed}) is above "
                           f"max_dead_letter_rate {output.max_dead_letter_rate:g}")
        truncated = manifest.dead_letters_by_reason.get("truncated", 0)
        if output.max_truncated_rate is not None and truncated / processed > output.max_truncated_rate:
            reasons.append(f"truncated rate {truncated / processed:.3f} ({truncated} of {processed}) is above "
                           f"max_truncated_rate {output.max_truncated_rate:g}")
    if output.min_rows is not None and manifest.rows < output.min_rows:
        reasons.append(f"{manifest.rows} row(s), fewer than min_rows {output.min_rows}")
    return "; ".join(reasons) or None


def apply_gate(loaded: Any, manifest: Any) -> str | None:
    """Judge a committed run; on an alert, record it in the run's manifest (rewritten in place)."""
    from pipeline.output.layout import OutputLayout
    from pipeline.storage import storage_for

    if manifest.status != "committed":
        return None
    alert = quality_alert(manifest, loaded.config.output)
    if alert is not None:
        manifest.alert = alert
        storage_for(loaded.output_uri, loaded.s3_settings).write_text(
            OutputLayout(loaded.output_uri).run_manifest(manifest.run_id), manifest.to_json())
    return alert


def gate_exit(loaded: Any, manifest: Any) -> int:
    """The exit code of `extract run`/`backfill`: 1 for a failed run, 4 (printing why) for a committed run
    that misses the quality bar, else 0."""
    import sys

    from pipeline import exit_codes

    if manifest.status != "committed":
        return exit_codes.FAILED
    alert = apply_gate(loaded, manifest)
    if alert is None:
        return exit_codes.OK
    print(f"quality alert (exit {exit_codes.QUALITY_ALERT}): {alert}", file=sys.stderr)
    return exit_codes.QUALITY_ALERT
