# IPAM (issue 6): rdmanet-ipam plugin, real kube-apiserver + etcd for the
# apiserver test tier, and the allocation benchmark.
TOOLS_BIN ?= $(CURDIR)/.tools/bin
export TOOLS_BIN

.PHONY: k8s-tools bench-ipam
k8s-tools:
	hack/build-k8s-tools.sh

test-prereqs:: k8s-tools

# Benchmark against the real API server: 1, 10 and 64 concurrent allocators over
# 10 node identities, 1000 allocations each; prints one ipam-bench summary line per run.
bench-ipam: k8s-tools
	$(GO) run ./test/bench/ipam -allocations=1000 -nodes=10 -concurrency=1,10,64
