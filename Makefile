# Two set-up commands on a fresh machine: `make run` and `make test`.
PY        ?= python3
VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed
LEDGER    ?= $(or $(LOOPLEDGER_DB),ledger.sqlite)
PORT      ?= 8501

.PHONY: run test bench lint ingest clean mutants screenshots

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

ingest: $(STAMP)
	$(BIN)/loopledger ingest sample_data --db $(LEDGER)

# A new ledger also gets sample_data/labels.csv, so the first dashboard scores the guards (the
# leaderboard, Compare's precision and recall); an existing one keeps the labels a person gave.
run: $(STAMP)
	@echo "LoopLedger ledger: $(abspath $(LEDGER))  (override: make run LEDGER=path or LOOPLEDGER_DB=path)"
	@if test -e $(LEDGER); then new=no; else new=yes; fi; \
	$(BIN)/loopledger ingest sample_data --db $(LEDGER) || test $$? -eq 3 || exit 1; \
	if test $$new = yes; then $(BIN)/loopledger labels import sample_data/labels.csv --db $(LEDGER) || exit 1; fi
	@echo "Dashboard: http://127.0.0.1:$(PORT)/"
	$(BIN)/loopledger dashboard --db $(LEDGER) --port $(PORT)

# Four workers on a 2-core machine: many tests wait on real clients, servers and a browser, and
# two workers left the cores idle a quarter of the run (no test's verdict depends on a timing).
# Bytecode caches are written even where PYTHONDONTWRITEBYTECODE is set (they stay in the
# gitignored __pycache__/): without them each xdist worker re-rewrote every test module (13 s
# of CPU against 4 s) and each of the ~900 `loopledger` processes the tests start recompiled
# the package (about 0.1 s of CPU each), on a run that is CPU-bound on two cores.
# --dist loadgroup keeps each browser-test module on one worker (tests/e2e/conftest.py), so its
# ledger, its dashboard server and its browser context are made once, not once per worker.
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 4 --dist loadgroup

bench: $(STAMP)
	$(BIN)/python -m bench

# The dashboard screenshots in docs/screenshots (1400x1000, headless chromium; their own ledgers).
screenshots: $(STAMP)
	$(BIN)/python docs/screenshots/take.py

# Mutation testing of the detectors and the scoring rule (slow; not part of `make test`):
# survivors in mutants/<module>.txt. One module: make mutants MODULES=detectors/progress.py
mutants: $(STAMP)
	$(BIN)/python -m bench.mutants $(MODULES)

lint: $(STAMP)
	$(BIN)/ruff check ingest app tests bench
	$(BIN)/python -m tests.layers_support

clean:
	rm -rf $(VENV) .pytest_cache test-artifacts .lint .mutants
