# `make demo` and `make test` build .venv themselves on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.assay-installed
SERVICES := $(VENV)/.test-services-installed

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml scripts/install_local_backend.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps "offensivetext==1.3.9"
	bash scripts/install_local_backend.sh $(PY)
	touch $(STAMP)

# PostgreSQL and Chromium for the store and dashboard tests (Debian packages).
$(SERVICES): scripts/install_test_services.sh $(STAMP)
	bash scripts/install_test_services.sh $(PY)
	touch $(SERVICES)

install: $(STAMP)

# No key needed: the table says which scorer produced each column and how good it was measured
# to be; `judge check` then measures those scorers on the calibration sets that ship with assay.
demo: $(STAMP)
	$(VENV)/bin/assay eval examples/rag_qa.jsonl --metrics auto --out results/demo
	$(VENV)/bin/assay judge check

test: $(STAMP) $(SERVICES)
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/bench_eval_speed.py

clean:
	rm -rf $(VENV) results .pytest_cache
