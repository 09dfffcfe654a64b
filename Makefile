# archsim: `make demo` runs the main job on a built-in default; `make test` sets up and runs the test suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup tools demo demo-trace test test-all bench lint clean

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip "setuptools>=77"   # 77: reads project.license as an SPDX string
	$(BIN)/pip install -q -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

# Icarus Verilog (cocotb simulator), Verilator (lint) and Yosys (synthesis statistics) come from the OS packages.
tools:
	@if ! command -v iverilog >/dev/null 2>&1 || ! command -v verilator >/dev/null 2>&1 \
	    || ! command -v yosys >/dev/null 2>&1; then \
	  echo "installing iverilog, verilator and yosys from the OS packages"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq iverilog verilator yosys >/dev/null; \
	fi

# Main job on a built-in default: PIM-GPT decodes 64 tokens of GPT-2 small, then a report with figures.
demo: setup
	$(BIN)/archsim run --system pimgpt --model gpt2-small --tokens 64 --timeline --json demo-out/pimgpt-gpt2-small.json
	$(BIN)/archsim report demo-out/pimgpt-gpt2-small.json -o demo-out/report
	@echo "open demo-out/report/report.html"

# A DRAM trace run (the foundation's job) on a synthetic random trace.
demo-trace: setup
	$(BIN)/archsim trace synthetic:random:200000 --preset HBM2_2Gbps_PC --json demo-out/trace-hbm2-random.json

test: setup tools
	$(BIN)/pytest -q

# Full paper reproductions and long runs as well (marked slow).
test-all: setup tools
	$(BIN)/pytest -q -m "slow or not slow"

bench: setup
	$(BIN)/python benchmarks/bench_dram.py
	$(BIN)/python benchmarks/bench_trace_cli.py
	$(BIN)/python benchmarks/bench_pimgpt.py
	$(BIN)/python benchmarks/bench_duplex.py

lint: setup
	$(BIN)/ruff check archsim tests benchmarks

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache demo-out
