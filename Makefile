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

# The main job: until the simulated-node demo lands, run the agent against the
# bundled fixture node (two RoCE PFs, one IB PF, a plain NIC, the default-route
# NIC) with the seed pool configs and print the discovered pools.
FIXTURE_DIR ?= $(CURDIR)/_output/fixture-node
demo: build
	@mkdir -p $(FIXTURE_DIR)/proc/net
	$(GO) run ./test/sysfsfixture/mkfixture $(FIXTURE_DIR)/sys
	@printf 'Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\neno1\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n' > $(FIXTURE_DIR)/proc/net/route
	$(BIN)/rdmanet-agent --once --sysfs-root $(FIXTURE_DIR)/sys --proc-root $(FIXTURE_DIR)/proc \
		--config examples/agent/sriovdp-config.yaml --config examples/agent/nicclusterpolicy.yaml \
		--rdma-netns-mode exclusive
