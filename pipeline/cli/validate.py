"""`extract validate CONFIG [--date D]`: check a job's config, schema and input without running it."""

from __future__ import annotations

import argparse

from pipeline.cli.options import days, job_options, overrides
from pipeline.config import SIMULATED, ConfigError, LoadedConfig, load_config
from workers.windows import WINDOWS, window_policy


def backend_lines(routes) -> list[str]:
    """The backends each schema compiles on, their compile times and errors, and what the engine does not enforce."""
    lines = [f"  backends {', '.join(routes.backends)} ({len(routes.verdicts)} schema(s) checked)"]
    for verdict in routes.verdicts:
        compiled = ", ".join(f"{b} {s:.3f}s" for b, s in verdict.compile_s.items())
        status = verdict.backend or "NONE (rows dead-lettered as schema_unsupported)"
        lines.append(f"    {verdict.name} ({verdict.schema_hash}): {status}; compile {compiled or '-'}")
        lines += [f"      {backend}: {error}" for backend, error in verdict.errors.items()]
        if verdict.unenforced:
            keywords = ", ".join(sorted({k for k, _ in verdict.unenforced}))
            lines.append(f"      not enforced by the engine: {keywords} → enforced by the post-check "
                         "(JSON Schema Draft 2020-12 validator, every output)")
    return lines


def window_line(loaded: LoadedConfig) -> str:
    """The line on the job's context and its long documents (`input.long_documents`, `workers.windows`)."""
    cfg = loaded.config
    context = (f"  window   model.max_model_len {cfg.model.max_model_len} ({loaded.max_model_len_source}); "
               f"max_tokens {cfg.model.max_tokens}")
    if cfg.input.long_documents != WINDOWS:
        return context + "; a longer document is input_too_long (input.long_documents: dead_letter)"
    policy = window_policy(cfg.input)
    size = f"up to {policy.window_tokens} document tokens" if policy.window_tokens else "as many tokens as fit"
    return (context + f"; a longer document is read in windows of {size}, {policy.overlap:.0%} overlap, "
            f"at most {policy.max_windows} (input.long_documents: windows)")


def cmd_validate(args: argparse.Namespace) -> int:
    from pipeline.reader import sample_input
    from pipeline.routing import route_schemas
    from pipeline.run import preflight
    from pipeline.stage_config import RoutingConfig
    from pipeline.storage import storage_for
    from workers.engine import unknown_engine_kwargs

    loaded = load_config(args.config, overrides(args))
    span = days(loaded, args.date)
    plan = preflight(loaded, span[0])
    # The simulated engine's settings travel in engine_kwargs; they are no vLLM arguments and were checked already.
    simulated = loaded.config.model.path == SIMULATED
    unknown = [] if simulated else unknown_engine_kwargs(loaded.config.model.engine_kwargs)
    if unknown:
        raise ConfigError(f"model.engine_kwargs: {', '.join(map(repr, unknown))} is not an argument of the pinned "
                          "vLLM's EngineArgs")
    in_storage = storage_for(plan.partition.input_uri, loaded.s3_settings)
    try:  # the documents themselves, sampled: undecodable values are reported, unreadable pages refused
        warnings = sample_input(in_storage, plan.files, [c for c in (loaded.config.input.text_column,
                                                                     loaded.config.input.schema_column) if c])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    contract = loaded.contract
    # The same schema check a run makes before any actor starts: bounds, compile per backend, routing.
    routes = route_schemas(RoutingConfig.of(loaded), [(in_storage, plan.units)])
    print(f"{args.config}: ok")
    print(f"  input   {plan.rows_to_read} of {plan.total_rows} documents in {len(plan.files)} file(s), "
          f"{len(plan.units)} unit(s)")
    for warning in warnings:
        print(f"  warning {warning}")
    print(f"  schema  {contract.name}@{contract.version} (hash {contract.hash}) from {contract.source}")
    print(f"  columns {', '.join(f'{f.name}: {f.type}' for f in contract.layout.schema)}")
    if not loaded.config.model.constrained:
        print("  decoding unconstrained (model.constrained: false): no grammar; outputs are still checked")
    for line in lever_lines(loaded):
        print(line)
    print(window_line(loaded))
    for line in backend_lines(routes):
        print(line)
    for line in gold_lines(loaded, args.gold) if args.gold else []:
        print(line)
    return 0


def gold_lines(loaded: LoadedConfig, gold: str) -> list[str]:
    """Reach on the gold (the share of its values each document's grammar allows, overall and per field), then
    every gold value the grammar refuses, with its document, its field and what the finder read instead."""
    from pipeline.tools.evaluate import EvalError, load_gold
    from pipeline.tools.evaluate.inputs import gold_documents
    from pipeline.tools.evaluate.reach import grammar_mode, job_reach

    try:
        golds = load_gold(gold, loaded.config.input.id_column)
    except EvalError as exc:
        raise ConfigError(f"--gold: {exc}") from None
    documents, schemas = gold_documents(loaded, set(golds))
    found = job_reach(loaded, {i: golds[i] for i in documents}, documents, schemas)
    o = found.summary()["overall"]
    share = "-" if o["reach"] is None else f"{o['reach']:.3f}"
    lines = [f"  reach   {share}: {o['reached']} of {o['gold']} gold values of {found.documents} document(s) are "
             f"values the grammar allows (schema_policy.grounding: {grammar_mode(loaded)[0]})"]
    lines += [f"    {path}: {s['reach']:.3f} ({s['reached']} of {s['gold']})" for path, s in found.fields().items()]
    if len(golds) > found.documents:
        lines.append(f"  warning {len(golds) - found.documents} gold document(s) are not in the input")
    if found.refusals:
        lines.append(f"  warning {len(found.refusals)} gold value(s) the grammar refuses (the model cannot write "
                     "them; mark such a field x-grounded: false):")
        lines += [f"    {refusal.line()}" for refusal in found.refusals]
    return lines


def lever_lines(loaded: LoadedConfig) -> list[str]:
    """How each field is decoded, what the prompt shows, and a warning per setting that measured worse."""
    from pipeline.field_warnings import example_warnings
    from pipeline.levers import job_levers

    levers = job_levers(loaded)
    cfg = loaded.config
    lines = [f"  decoding schema_policy.grounding: {levers.grounding}: {levers.fields}"]
    lines += [f"    {d.line()}" for d in levers.decodings]
    if levers.lists:
        lines.append(f"  lists    {levers.lists} (schema_policy.repeated_items: {cfg.schema_policy.repeated_items})")
    system = "; system prompt set" if cfg.system else ""
    lines.append(f"  prompt   examples: {levers.examples}, {levers.example_source}; schema shown: "
                 f"{levers.schema_shown} (prompt_schema: {cfg.prompt_schema}){system}")
    copied = example_warnings([example.output for example, _ in loaded.examples or []])
    return lines + [f"  warning  {w}" for w in levers.warnings] + [f"  warning  examples: {w}" for w in copied]


def register(sub: argparse._SubParsersAction) -> None:
    validate = sub.add_parser("validate", parents=[job_options(
        rate_help="a quality bar to check, 0 to 1 (overrides output.max_dead_letter_rate): validate only checks "
        "that the value is one; `extract run` applies it")],
                              help="check a job's config, schema and input without running it")
    validate.add_argument("--date", help="the partition to check when input.uri has {date}")
    validate.add_argument("--gold", metavar="GOLD", help="JSONL or Parquet gold records (as `extract eval` takes "
                          "them): also report the share of their values the grammar allows, and list every one it "
                          "refuses with what the document's finder read instead")
    validate.set_defaults(func=cmd_validate)
