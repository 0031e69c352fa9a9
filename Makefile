# `make run`: set up .venv if it is missing, then run the sample job with the bundled model.
# `make test`: set up the same way, then run the test suite.
VENV  ?= .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.setup-complete

.PHONY: setup run test lint clean

$(STAMP): pyproject.toml infra/setup-cpu.sh
	VENV=$(VENV) bash infra/setup-cpu.sh

setup: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/extract run jobs/extract.yaml

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check pipeline schemas workers tests jobs

clean:
	rm -rf out .pytest_cache
