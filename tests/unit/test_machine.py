"""The machine stamp in benchmark reports (pipeline/tools/machine.py): read from /proc/cpuinfo's text."""

from __future__ import annotations

from pipeline.tools.machine import ISA, _cpuinfo, describe, machine

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme sse sse2 avx fma avx2 bmi2

processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu vme sse sse2 avx fma avx2 bmi2
"""
XEON = "model name\t: Intel(R) Xeon(R) Platinum 8481C\nflags\t: avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sve\nCPU part\t: 0xd40\n"


def test_the_model_and_the_instruction_sets_torch_picks_between():
    assert _cpuinfo(EPYC) == ("AMD EPYC", ["avx2", "fma"])
    assert _cpuinfo(XEON) == ("Intel(R) Xeon(R) Platinum 8481C",
                              ["avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"])
    assert _cpuinfo(ARM) == (None, ["asimd", "sve"])  # aarch64 names no model there
    assert _cpuinfo("") == (None, [])


def test_the_stamp_of_this_machine_and_its_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(XEON)
    stamp = machine(info)
    assert stamp["cpu"].startswith("Intel") and stamp["isa"][-1] == "amx_tile"
    assert stamp["logical_cpus"] >= stamp["usable_cpus"] >= 1 and stamp["torch"]
    line = describe(stamp)
    assert line.startswith("Machine: Intel(R) Xeon(R) Platinum 8481C (") and "avx512_bf16" in line
    missing = machine(tmp_path / "absent")
    assert missing["isa"] == [] and describe(missing).endswith(f"vLLM {missing['vllm']}.")
    assert "none of avx2, fma, avx512f" in describe(missing) and describe(None) == "Machine: not recorded."
    assert set(stamp["isa"]) <= set(ISA)
