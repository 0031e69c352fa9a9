"""`extract conformance`: how much of real-world JSON Schema the grammar engine enforces, and what our
post-check adds.

No structured-output engine promises that its output satisfies the whole schema (JSONSchemaBench,
arXiv 2501.10868), so the pipeline re-validates every output with a full validator. This harness
measures both sides on two corpora we were not tuned on (`../shared/corpora`, read-only):

- `jsonschemabench-dev`, per subset: compile coverage per backend and with the xgrammar → guidance
  fallback; compile time p50/p99; compliance of one generated output per schema *before* the
  post-check; that every row the post-check lets through is valid when re-validated independently;
  and our validator's agreement with the benchmark's own valid and invalid instances.
- `json-schema-test-suite` (draft2020-12), per keyword category: whether the XGrammar grammar rejects
  the suite's invalid instances, whether our validator does, and its agreement with the suite.

It writes DIR/conformance.json (every figure, and the per-schema detail) and DIR/conformance.md. A
run longer than one sitting can be split (`keep=True`): each run writes DIR/parts/*.json, and the
report is rendered from every part in the folder.

One concern per module: `corpora` (finding and reading them, the run's options), `judge` (verdicts),
`generate` (engines and generation), `harness` (the runs, per schema and case), `figures` (aggregation) and
`markdown`. This package re-exports their public names.
"""

from __future__ import annotations

from pipeline.tools.conformance.corpora import (
    BENCH,
    CORPORA,
    DEFAULT_CORPORA_ROOT,
    SUITE,
    SUITE_DRAFT,
    SUITE_REMOTES_BASE,
    BenchSchema,
    ConformanceError,
    Options,
    bench_subsets,
    check_selection,
    corpora_root_for,
    corpus_dir,
    corpus_folders,
    corpus_kind,
    load_bench,
    load_instances,
    load_suite,
    resolve_corpora,
    suite_categories,
    suite_registry,
)
from pipeline.tools.conformance.figures import (
    PUBLISHED,
    agreement_sum,
    build_report,
    compile_times,
    nearest_rank,
    summarize_bench,
    summarize_category,
    unenforced_counts,
)
from pipeline.tools.conformance.generate import (
    MIN_SCHEMA_TOKENS,
    PROMPT,
    PROMPT_CAP_MARKER,
    TEST_KV_CACHE_BYTES,
    Job,
    close_engine,
    fit_prompt,
    generate_all,
    generate_batch,
    make_engine,
    run_backend,
)
from pipeline.tools.conformance.harness import (
    BenchRun,
    bench_finish,
    bench_prepare,
    compile_all,
    compile_record,
    fallback_order,
    generation_record,
    generation_sample,
    grammar_for,
    prepare_parts,
    run_conformance,
    run_suite,
    suite_case,
    write_parts,
)
from pipeline.tools.conformance.judge import (
    GENERATED,
    NOT_GENERATED,
    agreement_tally,
    bench_instances,
    compact_json,
    first_line,
    independent_validator,
    instance_verdict,
    judge,
    post_check,
    share,
    suite_validator,
    verdict,
)
from pipeline.tools.conformance.markdown import render_markdown
from workers.compiler import BACKENDS

__all__ = [
    "BACKENDS", "BENCH", "CORPORA", "DEFAULT_CORPORA_ROOT", "GENERATED", "MIN_SCHEMA_TOKENS", "NOT_GENERATED",
    "PROMPT", "PROMPT_CAP_MARKER", "PUBLISHED", "SUITE", "SUITE_DRAFT", "SUITE_REMOTES_BASE", "TEST_KV_CACHE_BYTES",
    "BenchRun", "BenchSchema", "ConformanceError", "Job", "Options", "agreement_sum", "agreement_tally",
    "bench_finish", "bench_instances", "bench_prepare", "bench_subsets", "build_report", "check_selection",
    "close_engine", "compact_json", "compile_all", "compile_record", "compile_times", "corpora_root_for",
    "corpus_dir", "corpus_folders", "corpus_kind", "fallback_order", "first_line", "fit_prompt", "generate_all",
    "generate_batch", "generation_record", "generation_sample", "grammar_for", "independent_validator",
    "instance_verdict", "judge", "load_bench", "load_instances", "load_suite", "make_engine", "nearest_rank",
    "post_check", "prepare_parts", "render_markdown", "resolve_corpora", "run_backend", "run_conformance",
    "run_suite", "share", "suite_case", "suite_categories", "suite_registry", "suite_validator", "summarize_bench",
    "summarize_category", "unenforced_counts", "verdict", "write_parts",
]
