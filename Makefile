# Two commands for a newcomer:
#   make demo   build the environment from nothing, compile the seeds' workloads, print a report and a table
#   make test   build the environment from nothing and run every test (unit, differential, notebooks)
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU build of torch: on CI and laptops without a GPU, an unpinned `torch` would pull a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0
# Capture reads CPython bytecode, which changes between versions: its tests also run on 3.12 and 3.13.
# (There the same pin installs a CUDA build of torch, ~4.7 GB, that runs on the CPU.)
# Each is found as: the variable if set (make PYTHON312=/path/to/python3.12), else python3.12 on PATH, else
# pyenv's newest 3.12.x. A missing one stops `make test` with instructions; SKIP_PY312=1 (or SKIP_PY313=1)
# skips those runs on purpose (CI sets neither: there they always run).
# (A python3.1x on PATH counts only if it runs: pyenv's shims exist for versions that are not selected, and fail.)
find_python = $(firstword $(shell python$(1) -c 'import sys; print(sys.executable)' 2>/dev/null) \
	$(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1)))) python$(1))
PYTHON312 ?= $(call find_python,3.12)
PYTHON313 ?= $(call find_python,3.13)

# Each stage of `make test` is one process, so it runs two at a time (the CI machine has two cores), each
# stage's output printed whole when it ends. `make -j1 test` runs them one by one.
MAKEFLAGS += --jobs=2 --output-sync=target

.PHONY: demo test lint unit unit-lowerings unit-rest notebooks bench clean lab browser-deps models-hf4
.PRECIOUS: .venv3%/.installed  # made by a pattern rule, but kept: it is the environment

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[test,notebook,lab,hf]"
	touch $@

# .venv312, .venv313: the interpreter PYTHON312 or PYTHON313, with what the capture tests and notebooks need
.venv3%/.installed: pyproject.toml
	@command -v "$(PYTHON3$*)" >/dev/null || { echo "make: Python 3.$* not found (PYTHON3$*=$(PYTHON3$*))." \
		"make test runs the capture tests and notebooks on 3.$* too: install it (e.g. pyenv install 3.$*)," \
		"then put python3.$* on PATH or run make PYTHON3$*=/path/to/python3.$* test; or skip them with" \
		"SKIP_PY3$*=1 make test." >&2; exit 1; }
	$(PYTHON3$*) -m venv .venv3$*
	.venv3$*/bin/python -m pip install -q --upgrade pip
	.venv3$*/bin/python -m pip install -q "$(TORCH_PIN)"
	.venv3$*/bin/python -m pip install -q -e ".[test,notebook,hf]"
	touch $@

demo: $(VENV)/.installed
	$(PY) -m minicompiler.demo

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check minicompiler tests

test: lint unit $(if $(SKIP_PY312),,capture-py312) $(if $(SKIP_PY313),,capture-py313) notebooks models-hf4
	$(if $(SKIP_PY312),@echo "make test: SKIP_PY312 is set: the capture tests and notebooks did not run on Python 3.12")
	$(if $(SKIP_PY313),@echo "make test: SKIP_PY313 is set: the capture tests and notebooks did not run on Python 3.13")

# The unit tests in two halves, so that make runs them side by side with each other and the other stages
# (one pytest over all of tests/ was the longest stage by far: 30 of the CI machine's 44 minutes)
LOWERING_TESTS := tests/decompose tests/opinfo
unit: unit-lowerings unit-rest

unit-lowerings: $(VENV)/.installed
	TRITON_INTERPRET=1 $(VENV)/bin/pytest $(LOWERING_TESTS)

unit-rest: $(VENV)/.installed extension/labextension/package.json browser-deps
	TRITON_INTERPRET=1 $(VENV)/bin/pytest tests $(addprefix --ignore=,$(LOWERING_TESTS))

# capture-py312, capture-py313 (never files: a pattern rule, which make does not try for .PHONY targets)
capture-py3%: .venv3%/.installed
	TRITON_INTERPRET=1 .venv3$*/bin/pytest tests/capture tests/test_symbolic_sizes.py
	OMP_NUM_THREADS=$(if $(filter 12,$*),2,1) $(call run_notebooks,.venv3$*)

# The Hugging Face model tests again against the latest transformers 4 (the test venv has a pinned 5.x)
.venv-hf4/.installed: pyproject.toml
	$(PYTHON) -m venv .venv-hf4
	.venv-hf4/bin/python -m pip install -q "$(TORCH_PIN)" "transformers>=4.57,<5" pytest hypothesis numpy
	.venv-hf4/bin/python -m pip install -q --no-deps -e .
	touch $@

models-hf4: .venv-hf4/.installed
	TRITON_INTERPRET=1 .venv-hf4/bin/pytest tests/models/test_transformers.py

LABEXT_DIR := $(VENV)/share/jupyter/labextensions/minicompiler-jupyterlab

# The JupyterLab extension (extension/): tsc -> lib/ (its node tests), then the labextension the wheel ships.
# The venv only needs to exist (order-only): its editable install may have built the extension already. The build is
# then linked into the venv, as `jupyter labextension develop` does, so a browser reload shows a rebuilt extension.
extension/labextension/package.json: $(wildcard extension/src/*.ts extension/style/*) extension/package.json \
		| $(VENV)/.installed
	cd extension && npm install --no-audit --no-fund && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npm run build
	mkdir -p $(dir $(LABEXT_DIR)) && rm -rf $(LABEXT_DIR) && ln -s $(CURDIR)/extension/labextension $(LABEXT_DIR)

# Debian's Chromium for tests/browser (driven by the playwright package, never `playwright install`); where it cannot
# be installed, those tests skip and say why.
browser-deps:
	@test -x /usr/bin/chromium || { command -v apt-get >/dev/null && \
		$$( [ "$$(id -u)" = 0 ] || echo sudo -n ) apt-get update -q && \
		$$( [ "$$(id -u)" = 0 ] || echo sudo -n ) apt-get install -y -q chromium; } || \
		echo "chromium could not be installed: tests/browser will be skipped"

# JupyterLab on the course's notebooks, with the extension (installed by the venv's editable install or linked above)
lab: $(VENV)/.installed extension/labextension/package.json
	$(VENV)/bin/jupyter lab notebooks

# The notebooks are tests (nbval): their stored outputs must hold on every Python, thread count and device, so
# they run on 3.11 with one thread, and again on 3.12 with two and on 3.13 with one (capture-py3%).
run_notebooks = $(1)/bin/pytest --nbval notebooks --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg -p no:randomly

notebooks: $(VENV)/.installed
	OMP_NUM_THREADS=1 $(call run_notebooks,$(VENV))

bench: $(VENV)/.installed
	$(PY) -m minicompiler.bench --json benchmarks/results/cpu.json

clean:
	rm -rf $(VENV) .venv312 .venv313 build *.egg-info
