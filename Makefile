# The two commands: `make run` (set up this machine, then serve MCP over
# stdio) and `make test` (everything CI checks). `make help` lists the rest.
#
# Recipes are silent (@) and the scripts they call log to stderr: `make run`
# must leave stdout to the server's MCP frames.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# CACHE holds image archives, the containerd v2 build, Node.js 22 with the
# npm packages of integration/node (scripts/setup node), and the containerd
# roots the integration suite's daemons start on copies of (roots/, seeded
# by scripts/integration); it is expanded by the shell, so it follows
# XDG_CACHE_HOME and HOME at run time.
CACHE ?= $${XDG_CACHE_HOME:-$$HOME/.cache}/code-sandbox-mcp
BIN := bin/code-sandbox-mcp
GO ?= go
# -trimpath: go's build and test caches then key this module's packages by
# their content, not by the directory of the checkout, so that a clone
# elsewhere (CI's, each of docs/testing.md's clean clones) reuses what an
# earlier one built and tested; without it a clone at a new path built
# every package and ran every unit test again, some 2.5 minutes beside
# the integration lanes on 2 cores.
export GOFLAGS := -trimpath $(GOFLAGS)
# Flags for the integration runs' `go test`. The race detector is on by
# default; keep -race when you set them (INTEGRATION_FLAGS="-race -run X -v").
# The recipe passes them as typed, single-quoted for the shell: expanded by
# make, a pattern's $ took the blank after it ("-run ^TestX$ -v" became
# "-run ^TestX-v", which selects nothing).
INTEGRATION_FLAGS ?= -race -v

setup_env = CACHE="$(CACHE)" GO="$(GO)" BIN="$(BIN)"

.PHONY: help setup run build images unit integration test test-cgroupv2 bench

help: ## Show this list.
	@echo 'Usage: make TARGET'
	@echo
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9-]+):.*## /  \1\t/' | expand -t 18

setup: ## Set up this machine as root (apt packages, containerd, binary, images); idempotent, logs to stderr.
	@$(setup_env) scripts/setup

run: setup ## Set up, then serve MCP over stdio (stdout carries only the server's frames).
	@exec $(BIN)

build: ## Build the binary to bin/code-sandbox-mcp, and the sandboxes' init (C, needs cc) beside it.
	@$(setup_env) scripts/setup build

images: ## Build the image archives (cached in CACHE) and import them into the system containerd.
	@$(setup_env) scripts/setup packages containerd build images

unit: ## go vet, staticcheck (go.mod's tool) and the unit tests with -race (the integration suite skips itself).
	@$(setup_env) scripts/setup test-packages
	@$(GO) vet ./...
	@$(GO) tool staticcheck ./...
	@SANDBOX_INTEGRATION=0 $(GO) test -race ./...

integration: ## The integration suite, with -race, against private containerd 1.6 (Debian) and 2.x (go.mod's version) daemons.
	@$(setup_env) INTEGRATION_FLAGS='$(subst ','\'',$(value INTEGRATION_FLAGS))' scripts/integration

# unit and integration run side by side, after the apt packages both need
# (two apt-get at once would fight for dpkg's lock): unit's go vet,
# staticcheck and tests leave a core a third idle, which the suite's builds
# and image seeding before its lanes take.
test: ## unit and integration side by side; works on a fresh Debian 12 machine as root.
	@$(setup_env) scripts/setup packages test-packages
	@$(MAKE) -j2 unit integration

test-cgroupv2: ## The cgroup cases on cgroup v2 in a QEMU VM: runc and crun, containerd 1.6 and 2.x, with and without systemd (root; VM image cached in CACHE).
	@$(setup_env) scripts/cgroupv2

bench: ## Issue #5's side-by-side benchmark on private containerd 1.6 (root; table on stdout, JSON in bin/bench.json).
	@$(setup_env) scripts/bench
