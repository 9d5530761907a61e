# rdmanet — top-level build. Component-specific targets live in mk/*.mk.
SHELL := /bin/bash
GO ?= go
BIN ?= $(CURDIR)/bin
export GOFLAGS ?= -buildvcs=false

.PHONY: all build test test-prereqs demo
all: build

build::
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

# Components add prerequisites (tool builds, plugin binaries) with `test-prereqs::` in mk/*.mk.
test-prereqs:: build

test: test-prereqs
	hack/test.sh

-include mk/*.mk

# The main job, `sudo make demo`: the simulated-node demo, see mk/demo.mk.
