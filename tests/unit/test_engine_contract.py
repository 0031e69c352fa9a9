"""Issue 53 item 4: one engine contract (`workers.engine.contract.Engine`). Every engine subclasses it, one engine
per module; what the extractor and the actor call on an engine is the contract's; nobody probes an engine with
getattr/hasattr."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

import pytest

from workers.engine.contract import Engine
from workers.engine.host import HostedEngine
from workers.engine.thread import EngineThread
from workers.engine.vllm_engine import VllmEngine
from workers.simulated import SimulatedEngine

ROOT = Path(__file__).resolve().parents[2]
ENGINES = (VllmEngine, EngineThread, HostedEngine, SimulatedEngine)
# The modules that drive an engine, and the names they hold it by.
DRIVERS = ("workers/extractor.py", "workers/actor.py", "workers/windowed.py")
HOLDERS = {"engine", "self.engine"}


def _engine_uses(tree: ast.AST) -> tuple[set[str], list[str]]:
    """The attributes a module reads or calls on an engine (`engine.X`, `self.engine.X`), and each getattr/hasattr
    whose object is an engine (probing)."""
    used, probes = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) in HOLDERS:
            used.add(node.attr)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and node.args and ast.unparse(node.args[0]) in HOLDERS):
            probes.append(f"{node.lineno}: {ast.unparse(node)}")
    return used, probes


def test_every_engine_subclasses_the_contract_and_implements_it():
    for engine in ENGINES:
        assert issubclass(engine, Engine), engine
        assert not inspect.isabstract(engine), f"{engine.__name__} leaves {sorted(engine.__abstractmethods__)}"


def test_one_engine_per_module():
    modules: dict[str, list[str]] = {}
    for engine in ENGINES:
        modules.setdefault(engine.__module__, []).append(engine.__name__)
    assert all(len(names) == 1 for names in modules.values()), modules


def test_the_drivers_call_only_the_contract_and_never_probe_an_engine():
    contract = {name for name in dir(Engine) if not name.startswith("_")} | set(Engine.__annotations__)
    for where in DRIVERS:
        used, probes = _engine_uses(ast.parse((ROOT / where).read_text()))
        assert probes == [], f"{where} probes its engine: {probes}"
        assert used <= contract, f"{where} uses {sorted(used - contract)}, which the contract lacks"


def test_the_scan_sees_a_probe_and_a_call_outside_the_contract():
    used, probes = _engine_uses(ast.parse("def f(self, engine):\n    c = getattr(engine, 'compile', None)\n"
                                          "    self.engine.fly()\n    return hasattr(self.engine, 'x')\n"))
    assert "fly" in used and len(probes) == 2


def test_an_engine_without_a_required_method_cannot_be_made():
    class Half(Engine):
        def prompt_token_ids(self, prompt):
            return [1]

    with pytest.raises(TypeError, match="abstract"):
        Half()  # type: ignore[abstract]


def test_the_defaults_warm_to_compile_and_keep_the_sampling():
    class Tiny(Engine):
        max_model_len = 8

        def __init__(self):
            self.warmed = []

        def prompt_token_ids(self, prompt):
            return [1]

        def warm(self, json_schema):
            self.warmed.append(json_schema)
            return 0.5

        def generate(self, prompts, json_schema, max_tokens, temperature, seeds=None):
            return []

    tiny = Tiny()
    assert tiny.compile({"type": "object"}) == 0.5 and tiny.warmed == [{"type": "object"}]
    assert dict(tiny.sampling_options) == {} and tiny.grammar_bounds == (None, None) and tiny.tokenizer is None
    tiny.use_sampling({"seed": 3}, [200, None])
    assert tiny.sampling_options == {"seed": 3} and tiny.grammar_bounds == (200, None)
    assert dict(Tiny.sampling_options) == {}  # the instance's own, not the class's
    tiny.close()


def test_the_contract_imports_no_vllm_and_an_attached_actor_needs_none():
    import subprocess  # another test may have loaded vLLM in this process: a fresh one is the check

    code = ("import sys; import workers.engine.contract, workers.engine.host, workers.extractor; "
            "print('vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_an_actors_engine_thread_gives_the_script_density_its_tokenizer_one_caller_at_a_time():
    """The actor's engines hold the model's tokenizer (`Engine.tokenizer`), so a Chinese document's grammar bounds
    use its own tokens per character on a run, not only where a bare VllmEngine is held (bench, tune)."""
    import threading
    from types import SimpleNamespace

    from workers.extractor import script_density

    class Lock:
        def __init__(self) -> None:
            self.inner, self.taken = threading.Lock(), 0

        def __enter__(self) -> None:
            self.inner.acquire()
            self.taken += 1

        def __exit__(self, *exc: object) -> None:
            self.inner.release()

    four = SimpleNamespace(encode=lambda text, add_special_tokens=True: [0] * (2 * len(text)))  # 2 tokens a char
    thread = EngineThread.__new__(EngineThread)
    thread._engine, thread._tokenizing = SimpleNamespace(tokenizer=four), Lock()
    assert script_density(thread.tokenizer, "发票总额") == 2.0
    assert thread._tokenizing.taken == 1
    assert script_density(Engine.tokenizer, "发票总额") is None  # an engine holding none: no density
