"""A leaner CPU kernel for vLLM's sampling penalties, where the only penalty is a presence penalty.

vLLM 0.32 applies penalties (`vllm.model_executor.layers.utils.apply_penalties`, through
`vllm.v1.sample.ops.penalties`) to every row of the step's logits: with prompt-lookup speculation that is each
sequence × (1 + its drafts) rows over the 49,152-token vocabulary. For each step it builds the prompt's and the
output's token counts as int64 tensors of the logits' shape plus one column (each twice the float32 logits'
bytes), their boolean masks, and on CPU the repetition penalty's `torch.where` chain (four more float32 tensors
of the logits' shape), then the frequency and presence products (two more). The sample job sets only
`presence_penalty` (frequency 0, repetition 1), so all of that is multiplication by one and subtraction of zero.

`lean_penalties` gives the same logits, bit for bit, for that case: one boolean mask of the output tokens and
an indexed subtraction of each row's presence penalty where the mask is set. Any row with a frequency penalty,
a repetition penalty other than 1 or a negative presence penalty sends the whole call to vLLM's own function,
unchanged (`tests/integration/test_penalties.py` compares the two on random inputs).

Why it is not equal only by luck: vLLM subtracts `presence * mask` (0 or the penalty, in float32) from every
logit; x - 0.0 == x for every float x, -inf and -0.0 included, and x - p * 1.0 == x - p. (A negative penalty
makes that product -0.0, and -0.0 - -0.0 is +0.0: equal, but not the same bits, hence vLLM's kernel there.)
Its repetition step multiplies by 1.0 or divides by 1.0 where the penalty is 1, which is exact; its frequency
step subtracts 0 * count == 0.

`use("lean")`, the default on CPU (`workers.engine.cpu.cpu_patches`), puts it in place in this process through
`workers.vllm_compat`; `EXTRACT_PENALTY_KERNEL=vllm` keeps vLLM's.
"""

from __future__ import annotations

from typing import Any

from workers import vllm_compat

KERNELS = ("lean", "vllm")


def lean_penalties(logits: Any, prompt_tokens: Any, output_tokens: Any, presence_penalties: Any,
                   frequency_penalties: Any, repetition_penalties: Any) -> Any:
    """vLLM's `apply_penalties(logits, prompt_tokens, output_tokens, presence, frequency, repetition)`, in place,
    with the same result. `output_tokens` is padded with the vocabulary size, as vLLM pads it."""
    original = vllm_compat.original_penalties()
    if (bool((repetition_penalties != 1.0).any()) or bool((frequency_penalties != 0.0).any())
            or bool((presence_penalties < 0.0).any())):
        return original(logits, prompt_tokens, output_tokens, presence_penalties, frequency_penalties,
                        repetition_penalties)
    if not bool((presence_penalties != 0.0).any()) or output_tokens.numel() == 0:
        return logits
    import torch

    rows, vocab_size = logits.shape
    seen = torch.zeros((rows, vocab_size + 1), dtype=torch.bool, device=logits.device)
    seen.scatter_(1, output_tokens, True)
    row, token = seen[:, :vocab_size].nonzero(as_tuple=True)
    logits[row, token] -= presence_penalties[row]
    return logits


def use(kernel: str) -> str:
    """Apply penalties with `kernel` ("lean": this module's; "vllm": vLLM's own) in this process; returns it."""
    if kernel not in KERNELS:
        raise ValueError(f"EXTRACT_PENALTY_KERNEL={kernel!r} is not a penalty kernel: use one of {', '.join(KERNELS)}")
    if kernel == "vllm":
        vllm_compat.restore_penalties()
    else:
        vllm_compat.install_penalties(lean_penalties)
    return kernel
