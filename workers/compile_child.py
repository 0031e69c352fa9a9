"""The compile child: a process that loads one model's tokenizer once and answers compile and probe requests
(JSON lines on stdin, one JSON reply per line on stdout) for `workers.compiler.SchemaCompiler`.

"Compiles" means what vLLM itself accepts at request time on that backend, with our engine's options
(`disable_any_whitespace=True`): vLLM's own request validation for the backend (`validate_xgrammar_grammar`,
`validate_guidance_grammar`), then a real compilation of the grammar against the model's tokenizer, along the
same path vLLM's backend takes (XGrammar's `compile_json_schema`; `serialize_guidance_grammar` +
`llguidance.LLMatcher`), built as vLLM builds them (`workers.vllm_compat`). No engine is started: a tokenizer
is all a grammar needs.

Run as `python -m workers.compile_child MODEL [--any-whitespace]`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any

from workers import vllm_compat

BACKENDS = ("xgrammar", "guidance")


class _WorkerState:
    """Lives in the child: the tokenizer, an xgrammar compiler and an llguidance tokenizer, built once."""

    def __init__(self, model_path: str, disable_any_whitespace: bool) -> None:
        from workers.engine.imports import collector_paused

        if os.path.isabs(model_path) and not os.path.exists(model_path):  # said before seconds of vLLM's imports
            raise FileNotFoundError(f"no model folder at {model_path}")
        # vLLM's and transformers' imports, here and in the first compiles, without the garbage collector: about
        # 2 s less of every child's start (workers.engine.imports).
        with collector_paused():
            # the compiler copies vLLM's backends: the vLLM they were copied from, or one line
            vllm_compat.check(names=vllm_compat.COMPILE_HOOKS)
            self.tokenizer = vllm_compat.load_tokenizer(model_path)
            self.vocab_size = self._vocab_size(model_path)
            self.disable_any_whitespace = disable_any_whitespace
            self.xgr_compiler = vllm_compat.xgrammar_compiler(self.tokenizer, self.vocab_size)
            self.guidance_supported = vllm_compat.guidance_supports(self.tokenizer)
            self.ll_tokenizer = (
                vllm_compat.ll_tokenizer(self.tokenizer, self.vocab_size) if self.guidance_supported else None
            )
            # One trivial compile per backend pays the lazy imports and thread pools now, at startup,
            # so they never count against (or time out) the first real compile.
            for backend in BACKENDS:
                self.handle({"op": "compile", "backend": backend, "schema": '{"type": "integer"}'})

    @staticmethod
    def _vocab_size(model_path: str) -> int:
        from transformers import AutoConfig

        model_config = AutoConfig.from_pretrained(model_path)  # transformers' config: older ones have no text part
        text_config = getattr(model_config, "get_text_config", lambda: model_config)()
        return int(getattr(text_config, "vocab_size", None) or model_config.vocab_size)

    # vLLM's request-time validation, per backend (what `SamplingParams._validate_structured_outputs`
    # runs when the engine is configured with that backend).
    def vllm_validate(self, backend: str, schema_text: str) -> str | None:
        try:
            vllm_compat.check_json_nesting(schema_text)
            if backend not in BACKENDS:
                return f"unknown backend {backend!r}"
            if backend == "guidance" and not self.guidance_supported:
                return "the guidance backend supports only fast Hugging Face tokenizers"
            vllm_compat.validate_request(backend, schema_text)
        except Exception as exc:  # noqa: BLE001 - vLLM raises several types; each means "rejected"
            return f"vLLM rejects it: {one_line(exc)}"
        return None

    def build_matcher(self, backend: str, schema_text: str) -> Any:
        """The grammar matcher vLLM's backend would build for this request; raises if it cannot."""
        if backend == "xgrammar":
            import xgrammar as xgr

            separators = (",", ":") if self.disable_any_whitespace else None
            compiled = self.xgr_compiler.compile_json_schema(
                schema_text, any_whitespace=not self.disable_any_whitespace, separators=separators
            )
            return xgr.GrammarMatcher(compiled)
        import llguidance

        grammar = vllm_compat.guidance_grammar(schema_text, self.disable_any_whitespace)
        matcher = llguidance.LLMatcher(self.ll_tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return matcher

    def first_mask(self, backend: str, matcher: Any) -> str | None:
        """Compute the first token mask, as the engine does before the first token. llguidance
        builds its lexer lazily, so this is where its real compile cost (and any hang) shows up."""
        if backend == "xgrammar":
            import xgrammar as xgr

            matcher.fill_next_token_bitmask(xgr.allocate_token_bitmask(1, self.vocab_size))
            return None
        matcher.compute_bitmask()
        if matcher.is_error():
            return f"guidance cannot compile it: {one_line(Exception(matcher.get_error()))}"
        return None

    def accepts(self, backend: str, matcher: Any, text: str) -> bool:
        """Whether the matcher lets the model emit exactly `text` and then stop."""
        if backend == "xgrammar":
            return bool(
                matcher.accept_string(text)
                and matcher.accept_token(self.tokenizer.eos_token_id)
                and matcher.is_terminated()
            )
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return matcher.try_consume_tokens(ids) == len(ids) and bool(matcher.is_accepting())

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        if op == "sleep":  # test hook: a compile that hangs
            time.sleep(float(request["seconds"]))
            return {"ok": True}
        backend, schema_text = request["backend"], request["schema"]
        started = time.perf_counter()
        rejected = self.vllm_validate(backend, schema_text)
        if op == "compile" and rejected:
            return {"ok": False, "seconds": time.perf_counter() - started, "error": rejected}
        try:
            matcher = self.build_matcher(backend, schema_text)
        except Exception as exc:  # noqa: BLE001 - any compile failure is reported, not raised
            return {"ok": False, "seconds": time.perf_counter() - started, "error": rejected or
                    f"{backend} cannot compile it: {one_line(exc)}"}
        if op == "compile":
            error = self.first_mask(backend, matcher)
            return {"ok": error is None, "seconds": time.perf_counter() - started, "error": error}
        accepted = []
        for text in request["instances"]:
            matcher.reset()
            accepted.append(self.accepts(backend, matcher, text))
        return {"ok": rejected is None, "error": rejected, "accepted": accepted}


_NATIVE_PREFIX = re.compile(r"\[\d\d:\d\d:\d\d\] \S+:\d+: ")  # xgrammar's "[05:23:50] /project/cpp/x.cc:936: "


def one_line(exc: BaseException) -> str:
    text = _NATIVE_PREFIX.sub("", " ".join(str(exc).split())) or type(exc).__name__
    return text if len(text) <= 400 else text[:397] + "..."


def _worker_main(model_path: str, disable_any_whitespace: bool) -> int:
    """Child entry point: JSON requests on stdin, one JSON reply per line on the original stdout."""
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything a library prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    started = time.perf_counter()
    try:
        state = _WorkerState(model_path, disable_any_whitespace)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        reply.write(json.dumps({"ready": False, "error": one_line(exc)}) + "\n")
        return 1
    reply.write(json.dumps({"ready": True, "seconds": time.perf_counter() - started}) + "\n")
    for line in sys.stdin:
        if line.strip():
            reply.write(json.dumps(state.handle(json.loads(line))) + "\n")
    return 0


def _main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m workers.compile_child MODEL [--any-whitespace]", file=sys.stderr)
        return 2
    return _worker_main(argv[0], disable_any_whitespace="--any-whitespace" not in argv)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
