# `make run`: set up .venv if it is missing, then run the sample job with the bundled model.
# `make test`: set up the same way, then run the test suite, tests/unit and tests/integration (`make test-fast`:
# tests/unit only, the tests that start no engine, Ray cluster, compile child, S3 server or CLI subprocess).
# Neither needs root: `make browser` installs Chromium (Debian's, root or sudo) for the report's headless-browser
# tests; `make test` tries it without prompting and goes on without it (those tests then skip, saying why).
VENV  ?= .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.setup-complete

.PHONY: setup run test test-fast lint clean browser

$(STAMP): pyproject.toml infra/setup-cpu.sh
	VENV=$(VENV) bash infra/setup-cpu.sh

setup: $(STAMP)

run: $(STAMP)  # runs the sample job, then scores its rows against the sample gold set (precision, recall, F1)
	$(VENV)/bin/extract eval jobs/extract.yaml --gold jobs/sample/invoices_gold.jsonl

browser:
	bash infra/install-chromium.sh

# One test process by default. TEST_WORKERS=2: two (pytest-xdist), the tests that start real vLLM engines one after
# the other in one of them, every other module as a whole in either (tests/conftest.py, REAL_ENGINE_TESTS). On 2
# cores (two clean clones, one session) two processes saved 7% of the time (1,020 s against 1,096 s) for 35% more
# CPU (1,944 against 1,438 busy s): the real-engine tests are the critical path, and the other process slows them.
TEST_WORKERS ?= 0

test: $(STAMP)
	bash infra/install-chromium.sh --if-possible
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=30  # the 30 slowest, to see where the time goes

# The first tier: pure logic, in under a minute. tests/integration holds the tests marked (or auto-marked by
# their fixtures) `engine` (a vLLM engine, a Ray cluster, a compile child) or `slow` (an S3 server, child
# processes, the CLI); tests/conftest.py refuses such a test under tests/unit.
test-fast: $(STAMP)
	$(PY) -m pytest -q tests/unit

lint: $(STAMP)
	$(VENV)/bin/ruff check pipeline schemas workers tests jobs lab

clean:
	rm -rf out .pytest_cache
