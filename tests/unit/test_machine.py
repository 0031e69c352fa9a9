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


def test_the_cpu_work_of_a_span_from_two_readings_of_proc_stat(tmp_path):
    from pipeline.tools.machine import _cpu_line, cpu_seconds, cpu_work_line

    # user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s
    assert _cpu_line("cpu  1000 10 190 5000 100 0 0 0 400 0", 100) == (12.0, 51.0)  # guest is inside user
    assert _cpu_line("cpu0 1000 10 190 5000", 100) is None  # a core's line, not the machine's
    assert _cpu_line("cpu 1 2 3", 100) is None
    stat = tmp_path / "stat"
    stat.write_text("cpu  200 0 100 700 0 0 0 0 0 0\ncpu0 100 0 50 350 0 0 0 0 0 0\n")
    busy, idle = cpu_seconds(stat)
    assert busy > 0 and idle > busy
    assert cpu_seconds(tmp_path / "absent") is None
    line = cpu_work_line((100.0, 0.0), (1300.0, 800.0), 1000.0, 2)
    assert line.startswith("machine CPU: 1,200 busy CPU s in 1,000 s of wall time (1.20 of 2 cores")
    assert line.endswith("at least 600 s")
    assert cpu_work_line(None, (1.0, 1.0), 10.0, 2) is None and cpu_work_line((0, 0), (1, 1), 0.0, 2) is None
    live = cpu_seconds()
    assert live is None or live[0] >= 0
