"""The CPU KV-cache budget: sized from the job's need, capped by free memory, refused in one line."""

from __future__ import annotations

import pytest

from workers.memory import MIB


@pytest.mark.slow
def test_node_free_memory_agrees_with_vllm_on_this_machine():
    from vllm.utils.cpu_resource_utils import get_memory_node_info

    from workers.memory import node_free_memory

    ours, theirs = node_free_memory(0), get_memory_node_info(0).available_memory
    if ours is None:
        pytest.skip("no NUMA node information here")
    assert abs(ours - theirs) < 64 * MIB  # read a moment apart: free memory moves
