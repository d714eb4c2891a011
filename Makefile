# lifecycle.machine: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CLUSTER_DIR := .cluster
COLLECTIONS := $(CURDIR)/.tmp/collections
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export GOTOOLCHAIN := local

.PHONY: help venv tools cluster-up cluster-down cluster-status lint ruff yamllint ansible-lint docs-lint sanity \
        unit integration integration-all molecule test demo build bench chaos clean \
        controllers conformance awx-up awx-down awx-status awx-integration

help:
	@echo "make demo          start the local control plane and delete a machine with the role"
	@echo "make test          lint, sanity, unit and integration tests (starts the control plane)"
	@echo "make cluster-up    start the local control planes: the management one (Machines; kubeconfig in"
	@echo "                   $(CLUSTER_DIR)/kubeconfig) and a workload one (Nodes, Pods; $(CLUSTER_DIR)/workload/kubeconfig)"
	@echo "                   NO_WORKLOAD=1 starts the management one alone"
	@echo "make cluster-status whether both run"
	@echo "make cluster-down  stop both"
	@echo "make controllers   build the real Cluster API and OpenShift machine controllers (cached; minutes when cold)"
	@echo "make integration-all  the integration tests with those make test leaves out (integration_extended)"
	@echo "make conformance   every test beside the real controllers (make test runs a fixed subset; docs/controllers.md)"
	@echo "make awx-up        start a real AWX (built from AWX sources and the registries, cached), its execution"
	@echo "                   environment holding HEAD's collection; what a script needs is in .awx/admin.json"
	@echo "make awx-down      stop it"

$(BIN)/ansible: requirements.txt test-requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r test-requirements.txt
	touch $@

venv: $(BIN)/ansible
	@$(BIN)/python hack/cluster.py collections >/dev/null

tools:
	bash hack/build-tools.sh

# The management control plane in $(CLUSTER_DIR), then a workload one in $(CLUSTER_DIR)/workload.
cluster-up: venv
	$(BIN)/python hack/cluster.py up --dir $(CLUSTER_DIR)$(if $(NO_WORKLOAD), --no-workload)

cluster-down:
	$(PYTHON) hack/cluster.py down --dir $(CLUSTER_DIR)

cluster-status:
	$(PYTHON) hack/cluster.py status --dir $(CLUSTER_DIR)

# The real machine controllers (hack/build-controllers.sh), built from the Go module
# proxy when missing (about 4 minutes cold on 2 cores), else found in the cache at
# once: make test's integration step runs a fixed subset of tests beside them.
controllers:
	bash hack/build-controllers.sh

ruff: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

yamllint: venv
	$(BIN)/yamllint -s .

ansible-lint: venv
	$(BIN)/ansible-lint --offline

# The plugins', modules' and roles' docs as the Ansible docsite would render them (antsibull-docs).
docs-lint: venv
	bash hack/docs-lint.sh

lint: ruff yamllint ansible-lint docs-lint

sanity: venv
	bash hack/sanity.sh

unit: venv
	$(BIN)/pytest -q tests/unit

# Reuses a control plane started by `make cluster-up`; otherwise starts its own.
# WORKERS=N runs N pytest-xdist workers, each with a private control plane
# (about 830 MiB each); WORKERS=1 runs serially. Two by default: on 2 cores the
# suite (some 290 tests) takes about half its serial time, which keeps CI well
# under its hour. LIFECYCLE_MACHINE_REAL_CONTROLLERS=1 adds the fixed subset of
# tests beside the real controllers (marked real_controllers_subset; each starts
# control planes of its own); `make conformance` runs all of them.
WORKERS ?= 2
# make test leaves out the tests marked integration_extended (the Cluster API v1beta1-only
# variants of the workflow tests, whose differences the per-module tests prove on every
# flavour), to stay within CI's hour; INTEGRATION_ALL=1, or make integration-all, runs them too.
INTEGRATION_ALL ?=
integration: venv tools controllers
	LIFECYCLE_MACHINE_REAL_CONTROLLERS=1 $(BIN)/pytest -q -p no:cacheprovider -m "not awx$(if $(INTEGRATION_ALL),, and not integration_extended)" $(if $(filter-out 1,$(WORKERS)),-n $(WORKERS)) tests/integration

integration-all:
	$(MAKE) integration INTEGRATION_ALL=1

# A real AWX (hack/awx.py): built from AWX's source tarballs (LIFECYCLE_MACHINE_AWX_SOURCES,
# by default shared/awx beside the checkout) and the package registries, cached outside the
# repository keyed on the AWX commit (about 15 minutes cold on 2 cores, seconds after).
# `up` is idempotent, and rebuilds the execution environment from HEAD: commit first.
awx-up: venv
	$(BIN)/python hack/awx.py up

awx-down:
	$(PYTHON) hack/awx.py down

awx-status:
	$(PYTHON) hack/awx.py status

# The collection's AWX recipes on the real AWX (tests marked awx): one AWX for the
# session, so serially; it uses the AWX of `make awx-up` when that runs, else starts
# one and stops it at the end. The EE and the project are HEAD's: commit first
# (LIFECYCLE_MACHINE_AWX_COMMIT=worktree takes the tracked files as edited).
# make test runs the tests marked awx but those also marked awx_extended; AWX_ALL=1 runs them all.
AWX_ALL ?=
awx-integration: venv tools
	$(BIN)/pytest -q -p no:cacheprovider -m "awx$(if $(AWX_ALL),, and not awx_extended)" tests/integration

# The delete_machine role under molecule, with its idempotence step; the
# scenario starts and stops its own control plane.
molecule: venv tools
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/molecule test -s delete_machine

test: lint sanity unit integration awx-integration molecule

# The collection beside the real Cluster API and OpenShift machine controllers (every
# test marked real_controllers: tests/integration/test_real_controllers.py,
# test_live_controller.py, test_hooks_beside_real_controllers.py, the differential
# set test_conformance.py, ...), each on control planes of its own; make test runs a
# fixed subset of them.
conformance: venv tools controllers
	LIFECYCLE_MACHINE_CONFORMANCE=1 $(BIN)/pytest -q -p no:cacheprovider -rs -m real_controllers tests/integration

demo: venv tools
	$(BIN)/python hack/demo.py

# The tarball from the files of HEAD, not of the checkout (hack/build-collection.sh): commit first.
# BUILD_DIR=extensions/awx (or extensions/eda) writes it where the execution (decision) environment takes it.
BUILD_DIR ?= $(CURDIR)
build: venv
	ANSIBLE_GALAXY=$(BIN)/ansible-galaxy bash hack/build-collection.sh $(BUILD_DIR) HEAD

bench: venv tools
	$(BIN)/python benchmarks/drain_100.py
	$(BIN)/python benchmarks/delete_machines.py
	$(BIN)/python benchmarks/gate_latency.py
	$(BIN)/python benchmarks/workload_split.py

# Randomized delete_machine runs under API faults, kills and re-runs, each checked
# against the safety invariants (docs/chaos.md), on a private control plane.
# CHAOS_SEED fixes the soak (default: a random seed, printed).
CHAOS_RUNS ?= 200
CHAOS_SEED ?=
chaos: venv tools
	$(BIN)/python tests/chaos/soak.py --runs $(CHAOS_RUNS) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

clean: cluster-down awx-down
	rm -rf .tmp .awx lifecycle-machine-*.tar.gz
