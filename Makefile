# Everyday entry points. Each target sets up what it needs first (toolchains + .venv).
#   make demo   generate, build and run the bundled demo model on the host template
#   make test   lint and run the whole test suite, one pytest-xdist worker per core
#   make fuzz   the readers' property-based suite (tests/fuzz) with its long profile
VENV ?= .venv
export VENV
# Test workers (make test TEST_JOBS=0 runs in one process); PYTEST_ARGS adds pytest options.
# --dist loadfile keeps a module's tests on one worker, so its module fixtures (builds, QEMU
# boards, labgrid places) are made once.
# (nproc is asked once, at parse time, so the bench target's timed shell never runs it.)
NPROC := $(shell nproc 2>/dev/null || echo 1)
TEST_JOBS ?= $(NPROC)
PYTEST_ARGS ?=

.PHONY: setup demo test lint fuzz bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(VENV)/bin/project-api demo

lint: setup
	$(VENV)/bin/ruff check .

test: setup lint
	$(VENV)/bin/python -m pytest -ra -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS)

# 2,000 Hypothesis examples per reader with random seeds (CI runs 40 each, derandomized).
fuzz: setup
	HYPOTHESIS_PROFILE=long $(VENV)/bin/python -m pytest -n 0 -q tests/fuzz

# Each bench line's time is printed after it (scripts/timed-shell).
bench: private SHELL = $(CURDIR)/scripts/timed-shell
bench: setup
	$(VENV)/bin/python bench/transport.py
	$(VENV)/bin/python bench/rpc.py
	$(VENV)/bin/python bench/models.py
	$(VENV)/bin/python bench/validate.py
	$(VENV)/bin/python bench/stm32.py
	$(VENV)/bin/python bench/farm.py
	$(VENV)/bin/python bench/faults.py --parts validate,mlperftiny --rates 1e-3 --samples 300 --kws-samples 100
# The last line's benchmarks count (instructions under QEMU -icount, bytes), so they share the cores.
	$(VENV)/bin/python scripts/bench_parallel.py --jobs $(TEST_JOBS) bench/size.py bench/graph_memory.py bench/cortex_m.py bench/riscv.py bench/profile.py

clean:
	rm -rf build demo-out .pytest_cache .ruff_cache
