"""Heavy imports (torch, transformers, vLLM) with Python's cyclic garbage collector paused.

Importing vLLM builds about a million long-lived objects (its config classes are pydantic dataclasses, 867 of them
built at import). With the collector on, every few thousand new objects start a collection, and the older
generations are traversed again and again while the import goes on; `LLM.__init__`'s own `gc.collect()` then walks
them all once more. None of them is garbage. So the import runs with the collector off, and what it built is
frozen (`gc.freeze`: moved where collections no longer look) before the collector is turned back on.

Measured on 2 cores (the bundled model, `enforce_eager`, in-process; `docs/performance.md`, "An engine's start"):
a fresh process's imports and engine start took 11.1-11.6 s with the collector on and 7.9-8.2 s with it paused for
the imports. The frozen objects live as long as the process, as they would anyway; cyclic garbage made by the import
itself (about a hundred objects, by a collection after it) is kept instead of freed.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block (a heavy import) with the cyclic garbage collector off, then, if the block imported a module,
    freeze what exists, and turn the collector back on if it was on. A block whose modules were already imported
    (`has_accelerator` called again) freezes nothing: what a long-lived process built since stays collectable.
    Nested uses are fine: only the outermost turns the collector back on."""
    enabled = gc.isenabled()
    modules = len(sys.modules)
    gc.disable()
    try:
        yield
    finally:
        if len(sys.modules) > modules:
            gc.freeze()
        if enabled:
            gc.enable()


def model_tokenizer(model_path: str) -> Any:
    """The model folder's tokenizer (transformers' `AutoTokenizer`), transformers imported with the collector
    paused: for a process that counts tokens without an engine of its own (the KV sizing, an engine host's actor)."""
    with collector_paused():
        from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path)
