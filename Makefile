# Two entry points: `make demo` (the main job) and `make test` (ruff's lint and format checks, mypy, then the suite).
# Each creates .venv on first use and installs the package with the pinned constraints.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo lint test bench clean
LINTED := binding_lens tests benchmarks scripts

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/binding-lens demo

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy  # checks binding_lens, as [tool.mypy] in pyproject.toml says

# Two workers, one torch thread each (the suite's tensors are small: threads cost more than they give);
# `--dist loadfile` keeps the README's blocks in order on one worker. PYTEST_WORKERS=0 runs in-process.
PYTEST_WORKERS ?= 2
test: lint
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_hooks.py
	$(BIN)/python benchmarks/bench_scenes.py
	$(BIN)/python benchmarks/bench_extract.py
	$(BIN)/python benchmarks/bench_probes.py
	$(BIN)/python benchmarks/bench_cli_startup.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
