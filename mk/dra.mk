# DRA alignment benchmark (issue 16, "Measured"): on 8 simulated 8-GPU
# nodes (slices only), 64 pods of 1 GPU + 1 NIC and 16 pods of 4 GPUs + 4
# NICs in the seed's random order; the share of NIC allocations under the
# same PCIe root as their GPUs for rdmanet's DRA path (real kube-apiserver,
# kube-controller-manager and kube-scheduler from k8s-tools), and for the
# device-plugin path with kubelet's topology manager single-numa-node and
# none (a model of kubelet v1.37.2, see test/bench/dra/deviceplugin.go).
# Prints progress on stderr and ONE bench-dra summary line on stdout.
BENCH_DRA_FLAGS ?= -nodes=8 -pods1=64 -pods4=16 -seed=1

.PHONY: bench-dra
bench-dra: k8s-tools
	$(GO) run ./test/bench/dra $(BENCH_DRA_FLAGS)
