"""The one-screen summary printed at the end of a run."""

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
    lines.append(
        "  time       "
        + ", ".join(
            f"{label} {t[key]:.1f}s"
            for label, key in (("engine init", "engine_init_s"), ("schema compile", "schema_compile_s"),
                               ("generation", "generation_s"), ("total", "total_s"))
            if t.get(key) is not None
        )
        + (f", {t['docs_per_s']:.2f} docs/s" if t.get("docs_per_s") else "")
    )
    out = manifest.output_uri
    lines += [
        f"  output     {out}/rows  {out}/dead_letters",
        f"  manifest   {out}/_runs/{manifest.run_id}.json",
        "  query      python -c \"import duckdb; duckdb.sql(\\\"SELECT reason, count(*) FROM "
        f"read_parquet('{out}/dead_letters/*.parquet') GROUP BY 1\\\").show()\"",
    ]
    return "\n".join(lines)
