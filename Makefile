# nccl-preflight: `make demo` runs the validation on this machine, `make test` runs every check.
# Both create .venv and install what is missing (apt packages too, when run as root).

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# The lab hosts' Python: a node's, from requirements-node.txt alone (torch and nothing else).
NODE_VENV ?= .venv-node
# The CPU build of torch may lie on local disk; pip looks there first when it does.
WHEELS ?= /opt/wheels
PIP_FLAGS := --disable-pip-version-check -q $(if $(wildcard $(WHEELS)/*.whl),--find-links $(WHEELS))
LAB_APT := openssh-server iproute2 iptables nftables iperf3
# Headless browser for the report.html tests (tests/browser.py).
BROWSER_APT := chromium
# Debian's Slurm and munge for the lab's Slurm (tests/lab/slurm.py starts and stops every daemon).
SLURM_APT := slurmctld slurmd slurm-client munge
N ?= 4
LAB ?= dev
# pytest workers (pytest-xdist): three workers overlap the lab's waits even on 2 cores; one file
# stays on one worker (a module's lab fixture is built once). TEST_WORKERS=0 runs everything in
# this process.
TEST_WORKERS ?= 3
PYTEST_PARALLEL := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)
# tests/lab (and bench/) run every lab host on it: no lab run can lean on the control venv.
export NCCL_LAB_NODE_PYTHON := $(CURDIR)/$(NODE_VENV)/bin/python

.PHONY: help demo test lint unit lab-test apt-lab lab-up lab-down demo-lab bench clean rank-script \
	node-venv collection variables

help:  ## Show the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The project's own package (src/nccl_preflight: the node and core rooms), editable, from this
# tree alone: no index, no build environment (requirements.txt brings setuptools).
INSTALL_SELF = $(BIN)/pip install $(PIP_FLAGS) --no-deps --no-build-isolation -e .

$(VENV)/.demo-installed: requirements.txt requirements-node.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip install $(PIP_FLAGS) -r requirements.txt -r requirements-node.txt
	$(INSTALL_SELF)
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-node.txt requirements-dev.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip install $(PIP_FLAGS) -r requirements-dev.txt
	$(INSTALL_SELF)
	touch $@ $(VENV)/.demo-installed

$(NODE_VENV)/.node-installed: requirements-node.txt
	rm -rf $(NODE_VENV)
	$(PYTHON) -m venv $(NODE_VENV)
	$(NODE_VENV)/bin/pip install $(PIP_FLAGS) -r requirements-node.txt
	touch $@

# The Ansible collection nccl.preflight (src/nccl_preflight/core/collection.py), for
# `ansible-galaxy collection install build/collection/nccl-preflight-*.tar.gz`.
collection: $(VENV)/.demo-installed  ## Build the Ansible collection nccl.preflight into build/collection/.
	rm -rf build/collection
	$(BIN)/python -m nccl_preflight.core.collection build/collection/src
	$(BIN)/ansible-galaxy collection build build/collection/src --output-path build/collection

node-venv: $(NODE_VENV)/.node-installed  ## The lab hosts' Python: .venv-node from requirements-node.txt alone.

apt-lab:  ## Install the lab's system packages and chromium (as root; skipped otherwise).
	@if [ "$$(id -u)" = 0 ]; then \
	  missing=$$(for p in $(LAB_APT) $(BROWSER_APT); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    echo "Installing $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	  missing=$$(for p in $(SLURM_APT); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    echo "Installing $$missing (the lab's Slurm)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends $$missing >/dev/null; \
	  fi; \
	else echo "Not root: the multi-host lab and browser tests will be skipped."; fi

demo: $(VENV)/.demo-installed  ## Validate this machine (inventory/local: one node, gloo, two ranks).
	$(BIN)/ansible-playbook playbooks/validate.yml -i inventory/local
	@echo "Report: reports/latest/ (junit.xml, summary.md)"

lint: $(VENV)/.dev-installed  ## ruff, yamllint, ansible-lint (production profile), syntax check.
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/yamllint --strict .
	$(BIN)/ansible-lint --offline --profile production playbooks/ roles/
	$(BIN)/ansible-playbook --syntax-check -i inventory/local playbooks/validate.yml

unit: $(VENV)/.dev-installed  ## Unit tests only (no root, no lab).
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) tests/unit

# The two venvs (each installs torch) and the system packages are made side by side: on a fresh
# machine that takes about as long as the longest of them instead of their sum.
test:  ## Lint, then every test (lab tests need root).
	@$(MAKE) --no-print-directory -j3 $(VENV)/.dev-installed apt-lab node-venv
	@$(MAKE) --no-print-directory lint
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) --durations=30

lab-up: $(VENV)/.dev-installed apt-lab node-venv  ## Bring up a lab of N hosts named LAB (make lab-up N=4).
	$(BIN)/python -m tests.lab up --hosts $(N) --name $(LAB)

lab-down:  ## Tear down the lab named LAB (default dev).
	$(BIN)/python -m tests.lab down --name $(LAB)

demo-lab: $(VENV)/.dev-installed apt-lab node-venv  ## Bring up an N-host lab, validate it, show the report.
	$(BIN)/python -m tests.lab demo --hosts $(N)

bench: $(VENV)/.dev-installed apt-lab node-venv  ## Run the benchmarks and rewrite BENCHMARKS.md.
	$(BIN)/python -m bench.run

# The variables schema (src/nccl_preflight/core/variables.py) makes every role's defaults file and
# docs/variables.md; tests/unit/tree/test_variables_doc.py fails when they differ from it.
variables:  ## Rewrite the roles' defaults files and docs/variables.md from the variables schema.
	$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) docs/make_variables.py

rank-script:  ## build/nccl_check.pyz: the rank check in one file, as the launch ships it.
	$(PYTHON) src/nccl_preflight/core/zipapp.py files/nccl_check.py -o build/nccl_check.pyz

clean:  ## Remove the venvs and the reports.
	rm -rf $(VENV) $(NODE_VENV) reports
