# Two entry points: `make demo` (the main job) and `make test` (ruff's lint and format checks, mypy, then the suite).
# Each creates .venv on first use and installs the package with the pinned constraints.
# `make docs` builds the documentation site into site/ (mkdocs build --strict) and checks it in a browser.
# `make test-extras` runs the timm / open_clip tests in a second environment (.venv-extras, constraints-extras.txt).
# `make test-release` builds the wheel and the sdist, checks them, and installs the wheel into a fresh environment.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
STAMP_RELEASE := $(VENV)/.installed-release

VENV_EXTRAS := .venv-extras
STAMP_EXTRAS := $(VENV_EXTRAS)/.installed

.PHONY: setup demo lint test browser docs test-extras test-release bench bench-gpu clean
LINTED := binding_lens tests benchmarks scripts

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,docs]'
	touch $(STAMP)

# `python -m build` and twine, for `make test-release` only
$(STAMP_RELEASE): $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,docs,release]'
	touch $(STAMP_RELEASE)

# The second environment: torch 2.14.1 with its matching torchvision 0.29.1 (PyPI's torchvision does not
# load beside the torch 2.13.0 CPU build of constraints.txt), timm and open_clip; .venv stays as it is.
# `open-clip`, not `open_clip`: pip 23 matches an extra only by its normalized name.
$(STAMP_EXTRAS): pyproject.toml constraints-extras.txt
	test -x $(VENV_EXTRAS)/bin/python || $(PYTHON) -m venv $(VENV_EXTRAS)
	$(VENV_EXTRAS)/bin/python -m pip install -q -c constraints-extras.txt -e '.[test,timm,open-clip]'
	touch $(STAMP_EXTRAS)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/binding-lens demo

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy  # checks binding_lens, as [tool.mypy] in pyproject.toml says

# Two workers, one torch thread each (the suite's tensors are small: threads cost more than they give);
# `--dist loadfile` keeps the README's and the docs' blocks in order on one worker. PYTEST_WORKERS=0 runs
# in-process. The tests of the built site (`docs`) and of the built wheel (`release`) have their own targets.
PYTEST_WORKERS ?= 2
test: lint browser
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not docs and not release"

# Beyond pip: the viewer's browser test needs Debian's chromium (apt-get, as root) and playwright-core
# (npm ci in tests/browser from its package-lock.json; no browser build is downloaded). Where they cannot
# be installed the browser test skips, saying why.
browser:
	@echo "make test: beyond pip, the browser test needs Debian's chromium (apt-get install chromium, as root)" \
	  "and playwright-core (npm ci in tests/browser, no browser download): scripts/ensure_browser.sh installs what is missing"
	@bash scripts/ensure_browser.sh || echo "make test: the browser test will skip, saying why"

# The documentation site: mkdocs-material + mkdocstrings (pyproject's [docs]), built with --strict (a broken
# link, an API entry that does not resolve or a docstring that does not render fails), then the tests marked
# `docs` open it in headless Chromium; BINDING_LENS_DOCS=required turns their skip-when-missing into a failure.
docs: $(STAMP) browser
	rm -rf site
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	OMP_NUM_THREADS=1 BINDING_LENS_DOCS=required $(BIN)/python -m pytest -q -p no:xdist -m docs

# The release: the wheel and the sdist into dist/ (python -m build: the wheel is built from the sdist), twine
# check, then the tests marked `release` install the wheel into a fresh environment outside the checkout.
test-release: $(STAMP_RELEASE)
	rm -rf dist
	$(BIN)/python -m build --outdir dist
	$(BIN)/twine check --strict dist/*
	OMP_NUM_THREADS=1 BINDING_LENS_RELEASE=required $(BIN)/python -m pytest -q -p no:xdist -m release

# The tests marked `extras` (timm and open_clip against their own forward, the models guide's timm block, and
# TransformerLens finding binding_lens's bridge adapter after `pip install .` into a fresh venv: minutes) in
# .venv-extras; BINDING_LENS_EXTRAS=required turns their skip-when-missing into a failure there.
test-extras: $(STAMP_EXTRAS)
	OMP_NUM_THREADS=1 BINDING_LENS_EXTRAS=required $(VENV_EXTRAS)/bin/python -m pytest -q -p no:xdist -m extras

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_hooks.py
	$(BIN)/python benchmarks/bench_scenes.py
	$(BIN)/python benchmarks/bench_extract.py
	$(BIN)/python benchmarks/bench_extract.py --null-forward
	$(BIN)/python benchmarks/bench_probes.py
	$(BIN)/python benchmarks/bench_cli_startup.py

# Everything a lent GPU should measure (issue 34), into one JSON + Markdown report (benchmarks/gpu_report.py):
# on a CUDA machine `make bench-gpu`; anywhere `make bench-gpu GPU_REPORT_FLAGS="--device cpu --small"` proves
# the command works. A GPU machine without transformer-lens / nnsight / circuitsvis gets them as wheels
# (scripts/gpu_wheels.sh; see docs/measured.md), installed there with pip --no-index.
GPU_REPORT_FLAGS ?=
bench-gpu:
	$(if $(wildcard $(BIN)/python),$(BIN)/python,python3) benchmarks/gpu_report.py $(GPU_REPORT_FLAGS)

clean:
	rm -rf $(VENV) $(VENV_EXTRAS) build dist site *.egg-info .pytest_cache
