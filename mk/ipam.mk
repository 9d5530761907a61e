# IPAM (issue 6): rdmanet-ipam plugin, real kube-apiserver + etcd for the
# apiserver test tier, and the allocation benchmark.
TOOLS_BIN ?= $(CURDIR)/.tools/bin
export TOOLS_BIN

.PHONY: k8s-tools bench-ipam
# kube-scheduler and kube-controller-manager too: internal/dra's
# TestAlignmentScheduler runs them against the apiserver tier's server (the
# cluster tier needs them anyway, so a cold CI builds nothing extra).
k8s-tools:
	hack/build-k8s-tools.sh etcd kube-apiserver kube-scheduler kube-controller-manager

test-prereqs:: k8s-tools

# Benchmark against the real API server: 1, 10 and 64 concurrent allocators over
# 10 node identities, 1000 allocations each; prints one ipam-bench summary line per run.
bench-ipam: k8s-tools
	$(GO) run ./test/bench/ipam -allocations=1000 -nodes=10 -concurrency=1,10,64

# Exec'd IPAM side by side (issue 14): Whereabouts v0.9.2 (built from its Go
# module by hack/build-whereabouts.sh), rdmanet-ipam per call (no daemon) and
# rdmanet-ipam as a thin client of rdmanet-daemon (one per node identity), on
# one real API server in one run: 1000 ADDs at concurrency 10 over 10 nodes,
# then DEL of all, and 200 ADDs one at a time through the daemon (the thin
# binary's own cost). Binaries are built as the image ships them (static,
# -trimpath). Prints one ipam-compare line per plugin and the speedups.
# Root (the daemon serves ADDs for a pod network namespace only).
BENCH_IPAM_COMPARE_FLAGS ?= -adds=1000 -nodes=10 -concurrency=10
BENCH_IPAM_COMPARE_BIN := $(CURDIR)/_output/bench-ipam-compare/bin

.PHONY: bench-ipam-compare
bench-ipam-compare: k8s-tools whereabouts-tool
	@mkdir -p $(BENCH_IPAM_COMPARE_BIN)
	GOFLAGS=-buildvcs=true CGO_ENABLED=0 $(GO) build -trimpath $(GO_BUILD_FLAGS) -o $(BENCH_IPAM_COMPARE_BIN)/ ./cmd/rdmanet-ipam ./cmd/rdmanet-ipam-direct ./cmd/rdmanet-daemon
	$(GO) run ./test/bench/ipamcompare -bin $(BENCH_IPAM_COMPARE_BIN) -whereabouts $(TOOLS_BIN)/whereabouts \
	  -whereabouts-crds $(CURDIR)/.tools/whereabouts-crds $(BENCH_IPAM_COMPARE_FLAGS)
