# Two commands for a newcomer:
#   make demo   build the environment from nothing, compile the seeds' workloads, print a report and a table
#   make test   build the environment from nothing and run every test (unit, differential, notebooks)
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU build of torch: on CI and laptops without a GPU, an unpinned `torch` would pull a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0
# Capture reads CPython bytecode, which changes between versions: its tests also run on 3.12.
# (On 3.12 the same pin installs a CUDA build of torch, ~4.7 GB, that runs on the CPU.)
PYTHON312 ?= $(HOME)/.pyenv/versions/3.12.1/bin/python3.12
VENV312   ?= .venv312

.PHONY: demo test lint unit capture-py312 notebooks bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[test,notebook]"
	touch $@

$(VENV312)/.installed: pyproject.toml
	$(PYTHON312) -m venv $(VENV312)
	$(VENV312)/bin/python -m pip install -q --upgrade pip
	$(VENV312)/bin/python -m pip install -q "$(TORCH_PIN)" pytest hypothesis numpy
	$(VENV312)/bin/python -m pip install -q --no-deps -e .
	touch $@

demo: $(VENV)/.installed
	$(PY) -m minicompiler.demo

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check minicompiler tests

test: lint unit capture-py312 notebooks

unit: $(VENV)/.installed extension/lib/report.js
	TRITON_INTERPRET=1 $(VENV)/bin/pytest tests

capture-py312: $(VENV312)/.installed
	$(VENV312)/bin/pytest tests/capture

# The JupyterLab extension's renderer, compiled so tests/notebook can run its node tests.
extension/lib/report.js: extension/src/report.ts extension/package.json
	cd extension && npm install --no-audit --no-fund && npx tsc

notebooks: $(VENV)/.installed
	$(VENV)/bin/pytest --nbval notebooks --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg -p no:randomly

bench: $(VENV)/.installed
	$(PY) -m minicompiler.bench --json benchmarks/results/cpu.json

clean:
	rm -rf $(VENV) $(VENV312) build *.egg-info
