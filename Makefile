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

# Two test processes by default (pytest-xdist, TEST_WORKERS=beside): one runs tests/integration in the order of a
# one-process run, the other runs tests/unit only, at nice 19, in the cores' idle moments (tests/conftest.py,
# `--unit-beside`). TEST_WORKERS=0: one process. TEST_WORKERS=N: N processes, the tests that start real vLLM engines
# one after the other in one of them, every other module as a whole in any (REAL_ENGINE_TESTS); on 2 cores that
# costs more CPU than it saves time (docs/testing.md).
TEST_WORKERS ?= beside
ifeq ($(TEST_WORKERS),beside)
WORKER_ARGS := -n 2 --unit-beside
else
WORKER_ARGS := -n $(TEST_WORKERS)
endif

test: $(STAMP)
	bash infra/install-chromium.sh --if-possible
	$(PY) -m pytest -q $(WORKER_ARGS) --dist loadgroup --durations=30  # the 30 slowest, to see where the time goes

# The first tier: pure logic, in under a minute. tests/integration holds the tests marked (or auto-marked by
# their fixtures) `engine` (a vLLM engine, a Ray cluster, a compile child) or `slow` (an S3 server, child
# processes, the CLI); tests/conftest.py refuses such a test under tests/unit.
test-fast: $(STAMP)
	$(PY) -m pytest -q tests/unit

lint: $(STAMP)
	$(VENV)/bin/ruff check pipeline schemas workers tests jobs lab

clean:
	rm -rf out .pytest_cache
