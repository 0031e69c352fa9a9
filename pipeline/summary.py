"""What a person reads at the end of a run: a one-screen summary, and the per-day table of a backfill."""

from __future__ import annotations

from pipeline.manifest import RunManifest


def render_summary(manifest: RunManifest) -> str:
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
    timing = ", ".join(
        f"{label} {t[key]:.1f}s"
        for label, key in (("engine init", "engine_init_s"), ("schema compile", "schema_compile_s"),
                           ("generation", "generation_s"), ("total", "total_s"))
        if t.get(key) is not None
    )
    lines.append("  time       " + timing + (f", {t['docs_per_s']:.2f} docs/s" if t.get("docs_per_s") else ""))
    out = manifest.output_uri
    lines += [
        f"  output     {out}/rows  {out}/dead_letters",
        f"  manifest   {out}/_runs/{manifest.run_id}.json",
        f"  query      extract query {manifest.config_path} \"SELECT reason, count(*) FROM dead_letters GROUP BY 1\"",
    ]
    return "\n".join(lines)


def render_backfill_table(manifest: RunManifest) -> str:
    header = f"{'day':<12} {'status':<10} {'rows':>8} {'dead':>8} {'seconds':>9}  note"
    lines = [header, "-" * len(header)]
    for p in manifest.partitions:
        note = p.get("error") or (f"resumed {p['units_resumed']}/{p['units']} units" if p.get("units_resumed") else "")
        lines.append(f"{p['partition']:<12} {p['status']:<10} {p['rows']:>8} {p['dead_letters']:>8} "
                     f"{p['seconds']:>9.1f}  {note}")
    return "\n".join(lines)
