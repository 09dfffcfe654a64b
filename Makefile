# archsim: `make demo` runs the main job on a built-in default; `make test` sets up and runs the test suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup tools demo demo-trace test test-all bench lint clean

# Cold start (issue 26): the demo's channel kernel takes ~35 s of CPU to compile, so that starts as early as it can.
# The venv is made without pip and uv installs into it (uv itself from the system's pip): the venv, uv and numba
# importable in ~4 s instead of ~9 s with pip, and the rest of the dependencies in ~6 s of wall instead of ~18 s
# (docs/performance.md, "Cold start"); where the system's pip cannot install uv, a venv with pip installs it.
# --compile-bytecode: this machine sets PYTHONDONTWRITEBYTECODE, so without it every process would compile the
# modules it imports. numba, numpy and PyYAML (all the kernel needs; versions as pyproject.toml pins them) go in
# first, with the build back-end pyproject.toml names, then archsim.warm compiles the demo's kernel into numba's
# cache in the background, from the source tree, while the rest of the runtime dependencies installs; `make demo`
# and `make test` wait for it (a file lock) rather than compile it again. `make setup WARM=` skips the warm-up.
# The rest installs at a lower CPU priority than the compile, which is what `make demo` waits for (NICE= turns it
# off). The editable install builds with that back-end in place (--no-build-isolation: no throw-away build
# environment per set-up); the test extras are `make test`'s own step.
WARM   ?= pimgpt
WAIT   := $(BIN)/python -m archsim.warm --wait --lock $(VENV)/warm.lock
# After the demo's kernel, the set-up goes on warming the kernel variant of every other system a fresh clone runs
# (issue 38 item 3): trace (the lean kernel: dram-trace, npu_only), general (T3), neupims (NeuPIMs under
# its mappings' deep request window; neupims-shallow, a 32-entry window's, is `make test`'s only), npu_pim (NeuPIMs'
# NPU+PIM baseline, its deep window on one row buffer), one at a time
# at the lowest priority, under its own lock, so `make demo` does not wait for it (`make test` warms its own list).
# `make setup WARM_REST=` skips it.
WARM_REST ?= trace general neupims npu_pim
TEST_STAMP := $(VENV)/.installed-test
TOML   := import tomllib; d = tomllib.load(open("pyproject.toml", "rb"))
UV     := $(BIN)/uv
INSTALL := $(UV) pip install -q --python $(BIN)/python --compile-bytecode
NICE   ?= $(if $(WARM),nice -n 10)
# Each step of the set-up runs under archsim.heartbeat (standard library only, the system's Python): it says what
# it waits for at the start and every 10 s until the step ends (issue 35: a niced install under load was silent
# for 472 s), so no step of `make setup` is silent for longer.
BEAT   := PYTHONPATH="$(CURDIR)" $(PYTHON) -m archsim.heartbeat

$(STAMP): pyproject.toml setup.py
	@$(BEAT) "making the virtual environment $(VENV)" -- $(PYTHON) -m venv --without-pip $(VENV)
	@$(BEAT) "installing uv (the installer) with the system's pip" -- sh -c '$(PYTHON) -m pip --python \
	  $(BIN)/python install -q uv 2>/dev/null || { $(PYTHON) -m venv --clear $(VENV) && $(BIN)/python -m pip install -q uv; }'
	@$(BEAT) "installing numba, numpy and PyYAML (all the kernel compile needs)" -- \
	  $(INSTALL) $$($(PYTHON) -c '$(TOML); print(" ".join([r for r in d["project"]["dependencies"] \
	  if r.split(">")[0].split("[")[0] in ("numpy", "numba", "pyyaml")] + d["build-system"]["requires"]))')
	@if [ -n "$(WARM)" ]; then \
	  echo "setup: compiling the channel kernels $(WARM) in the background, then $(if $(WARM_REST),$(WARM_REST) at the lowest priority,nothing more) (log: $(VENV)/warm.log; make demo and make test wait for the first)"; \
	  PYTHONPATH="$(CURDIR)" nohup sh -c '$(BIN)/python -m archsim.warm $(WARM) --lock $(VENV)/warm.lock; \
	    if [ -n "$(WARM_REST)" ]; then nice -n 19 $(BIN)/python -m archsim.warm $(WARM_REST) --jobs 1 \
	      --lock $(VENV)/warm-rest.lock; fi' >$(VENV)/warm.log 2>&1 & fi
	@$(BEAT) "installing the other dependencies (pandas, matplotlib, pyarrow, ...) and archsim$(if $(NICE), at a lower priority than the compile)" -- \
	  $(NICE) $(INSTALL) --no-build-isolation -e .
	@touch $(STAMP)

# pytest, pytest-xdist, hypothesis, ruff, radon: pyproject.toml's `test` extra
$(TEST_STAMP): $(STAMP)
	@$(BEAT) "installing the test tools (pytest, pytest-xdist, hypothesis, ruff, radon)" -- \
	  $(INSTALL) $$($(PYTHON) -c '$(TOML); print(" ".join(d["project"]["optional-dependencies"]["test"]))')
	@touch $(TEST_STAMP)

setup: $(STAMP)

# Icarus Verilog (cocotb simulator), Verilator (lint) and Yosys (synthesis statistics) come from the OS packages.
tools:
	@if ! command -v iverilog >/dev/null 2>&1 || ! command -v verilator >/dev/null 2>&1 \
	    || ! command -v yosys >/dev/null 2>&1; then \
	  echo "installing iverilog, verilator and yosys from the OS packages"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; \
	  $(BEAT) "installing iverilog, verilator and yosys with apt-get" -- sh -c "$$SUDO apt-get update -qq && \
	    $$SUDO apt-get install -y -qq iverilog verilator yosys >/dev/null"; \
	fi

# Main job on a built-in default: PIM-GPT decodes 64 tokens of GPT-2 small, then a report with figures.
demo: setup
	@$(WAIT)
	$(BIN)/archsim run --system pimgpt --model gpt2-small --tokens 64 --timeline --json demo-out/pimgpt-gpt2-small.json
	$(BIN)/archsim report demo-out/pimgpt-gpt2-small.json -o demo-out/report
	@echo "open demo-out/report/report.html"

# A DRAM trace run (the foundation's job) on a synthetic random trace.
demo-trace: setup
	$(BIN)/archsim trace synthetic:random:200000 --preset HBM2_2Gbps_PC --json demo-out/trace-hbm2-random.json

# `make test` runs the suite on every core (pytest-xdist). Before pytest starts, it warms every kernel variant the
# suite compiles (the list: what a cold run of the suite leaves in numba's cache; longest first), one process per
# variant, side by side (archsim.warm), so no two test workers compile the same one at once (~50 s of CPU each). On
# a clean clone that starts at set-up, beside pip; the second call loads what is cached in a few seconds, and
# compiles what an edit of the kernel's source has made stale.
# --dist loadfile: a file's tests run in one worker, in file order, so module-scoped fixtures (the RTL tests' Icarus
# builds, the reference runs) are built once; --no-loadscope-reorder: files go out in collection order, which puts
# the RTL co-simulations last (tests/conftest.py; issue 27: the quick tests' dots first).
test test-all: WARM = general general-threads pimgpt pimgpt-threads trace trace-threads neupims neupims-shallow npu_pim
test test-all: WARM_REST =
PYTEST := $(BIN)/pytest -q -n auto --dist loadfile --no-loadscope-reorder
test: setup tools $(TEST_STAMP)
	@$(BIN)/python -m archsim.warm --wait --lock $(VENV)/warm-rest.lock
	@$(BIN)/python -m archsim.warm $(WARM) --lock $(VENV)/warm.lock
	$(PYTEST)

# Full paper reproductions and long runs as well (marked slow).
test-all: setup tools $(TEST_STAMP)
	@$(BIN)/python -m archsim.warm --wait --lock $(VENV)/warm-rest.lock
	@$(BIN)/python -m archsim.warm $(WARM) --lock $(VENV)/warm.lock
	$(PYTEST) -m "slow or not slow"

# Every speed benchmark once, each figure beside its target (benchmarks/targets.yaml); about an hour here, most
# of it NeuPIMs' 100 serving iterations. One benchmark: `$(BIN)/python benchmarks/run_all.py --only bench_t3.py`.
bench: setup
	@$(WAIT)
	$(BIN)/python benchmarks/run_all.py

lint: setup $(TEST_STAMP)
	$(BIN)/ruff check archsim tests benchmarks reports

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache demo-out
