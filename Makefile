# rdmanet — top-level build. Component-specific targets live in mk/*.mk.
SHELL := /bin/bash
GO ?= go
BIN ?= $(CURDIR)/bin
# VCS-stamped binaries (when built from a git work tree) let rdmanet-daemon
# prove a plugin file is its own build and run it in-process.
export GOFLAGS ?= -buildvcs=auto
# Build and test with go.mod's toolchain line (go1.26.11: the standard-library
# fixes govulncheck asks for). The go command fetches it once from the module
# proxy as golang.org/toolchain; a GOTOOLCHAIN in the environment wins.
export GOTOOLCHAIN ?= auto
# Every binary reports VERSION (internal/version): `<binary> --version`.
VERSION := $(shell cat $(CURDIR)/VERSION)
LDFLAGS ?= -X github.com/rdmanet/rdmanet/internal/version.Version=$(VERSION)
GO_BUILD_FLAGS ?= -ldflags '$(LDFLAGS)'

.PHONY: all build test test-prereqs demo
all: build

build::
	@mkdir -p $(BIN)
	$(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/ ./cmd/...

# Components add prerequisites (tool builds, plugin binaries) with `test-prereqs::` in mk/*.mk.
test-prereqs:: build

# The unit, netns, apiserver and kubelet tiers (hack/test.sh), govulncheck
# against an offline database (mk/security.mk: a finding fails the run), then
# the cluster tier twice: a real single node (its scenarios switch the node's
# mode), then a real three-node cluster (the cross-node scenarios); each is
# brought up, tested and taken down (mk/cluster.mk).
test: test-prereqs
	hack/test.sh
	$(MAKE) --no-print-directory vulncheck
	$(MAKE) --no-print-directory test-cluster
	$(MAKE) --no-print-directory test-cluster-multi

-include mk/*.mk

# The main job, `sudo make demo`: the simulated-node demo, see mk/demo.mk.
