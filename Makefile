# Everyday entry points. Each target sets up what it needs first (toolchains + .venv).
#   make demo   generate, build and run the bundled demo model on the host template
#   make test   lint and run the whole test suite
VENV ?= .venv
export VENV

.PHONY: setup demo test lint bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(VENV)/bin/project-api demo

lint: setup
	$(VENV)/bin/ruff check .

test: setup lint
	$(VENV)/bin/python -m pytest -ra

bench: setup
	$(VENV)/bin/python bench/transport.py
	$(VENV)/bin/python bench/rpc.py
	$(VENV)/bin/python bench/size.py
	$(VENV)/bin/python bench/models.py
	$(VENV)/bin/python bench/validate.py
	$(VENV)/bin/python bench/stm32.py
	$(VENV)/bin/python bench/cortex_m.py
	$(VENV)/bin/python bench/profile.py
	$(VENV)/bin/python bench/farm.py
	$(VENV)/bin/python bench/graph_memory.py
	$(VENV)/bin/python bench/faults.py --samples 10000 --samples-at 1e-3=2000

clean:
	rm -rf build demo-out .pytest_cache .ruff_cache
