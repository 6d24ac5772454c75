# Terrapin — guaranteed-service networking on a P4 switch.
#
#   make run      bring up the christie topology, the controller and its REST API
#   make shell [DEVICE=<switch>]   p4runtime-shell on a switch of that network, beside the controller
#   make test     every test suite, ending with one "N passed, M failed" line
#   make thrift-cli   simple_switch_CLI on terrapin-switch: BMv2's CLI tests, outputs compared with simple_switch_grpc
#   make conformance-compile   p4c's compile corpus: what p4c refuses refused, what it compiles loaded
#   make experiments [ONLY=E3] [SHORT=1] [ATTEMPTS=3] [RUNS=10]  E1-E11 (the seeds' results and the cut) and build/results/report.html
#   make jitter [SWITCH=bmv2]   how much the switch's delay outside its queues varies (its jitter_us)
#   make fabric-ptf [PROFILE=fabric|...|all] [SWITCH=terrapin|bmv2|both]   SD-Fabric's own PTF suite (docs/fabric-ptf.md)
#   make chaos [DURATION=300] [SEED=1] [FAULTS=a,b] [TOPO=sequoia-ring] [SWITCH=bmv2]   random faults under load, every promise checked
#
# make run and make test run `make setup` first, which installs what a fresh Debian machine lacks.
# p4lang's switch instead of the bundled one: `make bmv2` once, then SWITCH=bmv2
# (and P4C=p4c-bm2-ss for p4lang's compiler where it is installed).

SHELL := /bin/bash
.DEFAULT_GOAL := help

BUILD    := build
BIN      := $(BUILD)/bin
VENV     := $(BUILD)/venv
PY       := $(VENV)/bin/python
# setup records the Go it found or fetched (toolchain/go.mod names the release).
GO       ?= $(shell cat $(BUILD)/go.path 2>/dev/null || command -v go)

# The P4 compiler: the bundled terrapin-p4c, or p4lang's p4c-bm2-ss (same flags).
P4C      ?= $(BIN)/terrapin-p4c
# The switch: terrapin (bundled terrapin-switch) or bmv2 (p4lang's simple_switch_grpc: from PATH,
# else from build/oracle/bin, which `make bmv2` builds; scripts/bmv2-bin.sh decides).
# `make ptf` runs both switches unless SWITCH names one.
PTF_SWITCHES := $(if $(filter undefined default,$(origin SWITCH)),,$(SWITCH))
SWITCH   ?= terrapin
# STF conformance: the corpus, whose JSON the engine runs (ours | p4c), and the path
# packets and entries take (engine | p4runtime).
CORPUS   ?= ../shared/conformance/p4c-stf
JSON     ?= ours
VIA      ?= engine
TOPO     ?= christie
# make run's controllers: STORE=sqlite (one process, the default) or STORE=postgres with REPLICAS
# replicas on a PostgreSQL cluster in build/run/postgres (docs/deployment.md).
STORE    ?= sqlite
REPLICAS ?= 1

P4_OUT   := $(BUILD)/p4
P4_JSON  := $(P4_OUT)/terrapin.json
P4_INFO  := $(P4_OUT)/terrapin.p4info.txtpb

.PHONY: help setup toolchain p4 controller conformance conformance-compile ptf fabric-ptf shell test test-go \
        bench bench-engine bench-switch bench-controller run stop demo experiments chaos clean bmv2 bmv2-sources thrift-cli

help:
	@sed '/^$$/q' Makefile | sed 's/^# \{0,1\}//'

setup:
	@bash scripts/setup.sh

# p4lang's simple_switch_grpc, simple_switch and simple_switch_CLI into build/oracle/bin (cached: a
# second run is a no-op), from ORACLE=DIR, ../shared/oracle, or else the projects' public archives
# (fetched and verified: bmv2-sources does only that; BMV2_ARCHIVES=URL names another server).
bmv2:
	@bash scripts/build-bmv2.sh

bmv2-sources:
	@bash scripts/build-bmv2.sh --sources-only

toolchain:
	@mkdir -p $(BIN)
	cd toolchain && $(GO) build -o ../$(BIN)/ ./cmd/...

# Always recompiled (it takes milliseconds), so a newer compiler never leaves stale output.
p4: toolchain
	@mkdir -p $(P4_OUT)
	$(P4C) --target bmv2 --arch v1model --p4runtime-files $(P4_INFO) -o $(P4_JSON) p4src/terrapin.p4

controller:
	$(VENV)/bin/pip install -q -e controller

# The switch binary SWITCH names; for bmv2 the recipe asks scripts/bmv2-bin.sh (which says what
# to do when BMv2 is not there).
SWITCH_BIN = $(if $(filter bmv2,$(SWITCH)),$$(bash scripts/bmv2-bin.sh simple_switch_grpc),$(BIN)/terrapin-switch)

# VIA=p4runtime drives a real switch, SWITCH=terrapin or bmv2, each with its own xfail list
# (BMv2's: xfail-JSON-VIA-bmv2.txt). VIA=engine runs no switch, so SWITCH=bmv2 needs p4runtime.
STF_XFAIL = toolchain/stf/xfail-$(JSON)-$(VIA)$(if $(filter bmv2,$(SWITCH)),-bmv2).txt

conformance: toolchain
	@case "$(SWITCH):$(VIA)" in terrapin:*|bmv2:p4runtime) ;; \
	  bmv2:*) echo "conformance: SWITCH=bmv2 runs the corpus on simple_switch_grpc: give VIA=p4runtime" >&2; exit 2 ;; \
	  *) echo "conformance: SWITCH must be terrapin or bmv2, not '$(SWITCH)'" >&2; exit 2 ;; esac
	sw=$(SWITCH_BIN) && $(BIN)/terrapin-stf --corpus $(CORPUS) --json $(JSON) --via $(VIA) \
	    --p4c $(BIN)/terrapin-p4c --switch "$$sw" \
	    --xfail $(STF_XFAIL)

# p4c's compile corpus (../shared/conformance/p4c-compile): every reject/ program refused at the
# line p4c names, every accept/ program compiled and its JSON loaded by terrapin-switch's loader
# and, when BMv2 is built (scripts/bmv2-bin.sh), by simple_switch. One summary line.
COMPILE_CORPUS ?= ../shared/conformance/p4c-compile
conformance-compile:
	@set -o pipefail; ss=$$(bash scripts/bmv2-bin.sh simple_switch 2>/dev/null || true); \
	  cd toolchain && P4C_COMPILE_CORPUS=$(abspath $(COMPILE_CORPUS)) SIMPLE_SWITCH="$$ss" \
	  $(GO) test -count=1 -v -run '^TestConformanceCompile$$' ./cmd/terrapin-p4c/ | grep -v '^=== RUN'

ptf: toolchain p4
	PTF_SWITCHES="$(PTF_SWITCHES)" bash ptf-tests/run.sh

# SD-Fabric's PTF suite, unmodified, on SD-Fabric's program compiled by terrapin-p4c
# (fabric-ptf/run.sh, docs/fabric-ptf.md): PROFILE=fabric (default), fabric-int, fabric-upf,
# fabric-upf-int or all; SWITCH=terrapin (default), bmv2 or both; TEST="test.X ..." instead of
# the profile's selection; PTF_ARGS, TERRAPIN_SWITCH_ARGS: more flags. fabric-ptf/setup.sh builds
# the tester's venv (build/venv-fabric-ptf) first.
PROFILE ?= fabric
fabric-ptf: toolchain
	@bash fabric-ptf/setup.sh
	@PROFILE="$(PROFILE)" SWITCH="$(SWITCH)" TEST="$(TEST)" PTF_ARGS="$(PTF_ARGS)" \
	  TERRAPIN_SWITCH_ARGS="$(TERRAPIN_SWITCH_ARGS)" bash fabric-ptf/run.sh

# p4runtime-shell on a switch of the running make run network, beside its controller:
# DEVICE=<name or device id> picks one of several (SWITCH names the switch program elsewhere),
# PUSH=1 pushes build/p4's pipeline (refused while a controller is primary); scripts/p4rt-shell.sh.
# BMv2's Thrift runtime on terrapin-switch: BMv2's CLI tests on both switches, then simple_switch_CLI
# against simple_switch_grpc and terrapin-switch with the outputs compared (needs make bmv2; seconds).
thrift-cli: toolchain
	$(PY) -m pytest -q -p no:cacheprovider scripts/thrift-cli

shell:
	@SWITCH="$(SWITCH)" DEVICE="$(DEVICE)" PUSH="$(PUSH)" bash scripts/p4rt-shell.sh

test-go:
	cd toolchain && $(GO) vet ./... && $(GO) test ./...

test:
	@bash scripts/test-all.sh

bench: bench-engine bench-switch bench-controller bench-diff

bench-engine:
	cd toolchain && $(GO) test -run '^$$' -bench . -benchmem ./engine/

bench-switch: toolchain
	bash toolchain/bench/bench-switch.sh

# The differential check of terrapin-p4c against p4c's JSON (toolchain/difftest) at length:
# DIFF_PACKETS random packets per program, DIFF_SEED the base seed, DIFF_RUN a regexp of programs,
# CORPUS the corpus
# (make test runs it with 200 packets and seed 1; docs/toolchain.md, "Differential check").
DIFF_PACKETS ?= 20000
DIFF_SEED    ?= 1
.PHONY: bench-diff
bench-diff:
	cd toolchain && $(GO) test -count=1 -timeout 0 -run '^TestCorpus$$' -v ./difftest/ \
	    -args -diff.packets=$(DIFF_PACKETS) -diff.seed=$(DIFF_SEED) -diff.run='$(DIFF_RUN)' \
	    -diff.corpus=$(abspath $(CORPUS))

# BENCH_ARGS: e.g. --stores postgres --channels 2000 (python -m terrapin_tools.bench --help)
bench-controller: toolchain p4 controller
	$(PY) -m terrapin_tools.bench $(BENCH_ARGS)

run:
	@TOPO=$(TOPO) SWITCH=$(SWITCH) HEADLESS=$(HEADLESS) STORE=$(STORE) REPLICAS=$(REPLICAS) TLS=$(TLS) bash scripts/run.sh

stop:
	@bash scripts/stop.sh

demo:
	@SWITCH=$(SWITCH) bash scripts/demo.sh

experiments:
	@ONLY="$(ONLY)" SHORT="$(SHORT)" SWITCH=$(SWITCH) ATTEMPTS="$(ATTEMPTS)" RUNS="$(RUNS)" bash scripts/experiments.sh

# How much a switch's delay outside its queues varies (the jitter_us the controller is told):
# experiments/jitter/measure.py, docs/controller.md "Jitter". SHORT=1: 3 s per background.
jitter: toolchain
	@bash scripts/setup.sh && bash scripts/stop.sh --quiet && \
	  SWITCH=$(SWITCH) SHORT="$(SHORT)" $(PY) -m experiments.jitter.measure

# Random faults under load with the history checked afterwards (topo/chaos/run.py, issue 37;
# docs/deployment.md "Chaos"). TOPO defaults to the redundant testbed here, not make run's christie.
DURATION ?= 300
SEED     ?= 1
chaos: toolchain
	@bash scripts/setup.sh && bash scripts/stop.sh --quiet && \
	  $(PY) -m topo.chaos.run --duration $(DURATION) --seed $(SEED) --faults "$(FAULTS)" --switch $(SWITCH) \
	    --topo $(if $(filter command line environment,$(origin TOPO)),$(TOPO),sequoia-ring)

clean:
	rm -rf $(BUILD)
