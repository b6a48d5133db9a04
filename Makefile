# Two commands for a newcomer:
#   make demo   build the environment from nothing, compile the seeds' workloads, print a report and a table
#   make test   build the environment from nothing and run every test (unit, differential, notebooks)
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU build of torch: on CI and laptops without a GPU, an unpinned `torch` would pull a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0

.PHONY: demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[test,notebook]"
	touch $@

demo: $(VENV)/.installed
	$(PY) -m minicompiler.demo

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check minicompiler tests

test: $(VENV)/.installed lint
	TRITON_INTERPRET=1 $(VENV)/bin/pytest tests
	$(VENV)/bin/pytest --nbval notebooks --nbval-sanitize-with notebooks/sanitize.cfg -p no:randomly

bench: $(VENV)/.installed
	$(PY) -m minicompiler.bench --json benchmarks/results/cpu.json

clean:
	rm -rf $(VENV) build *.egg-info
