# Real single-node cluster (issue 12): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet (v1.37.2 modules),
# containerd v2.4.2 and runc v1.4.0, inside network namespaces and a private
# mount namespace (test/cluster, docs/cluster.md). Root.
#
#   sudo make cluster-up      build what is missing, start, install rdmanet; prints export KUBECONFIG=...
#   sudo make cluster-down    stop everything and check the machine is as before
#   sudo make test-cluster    up -> scenarios -> down
#   sudo make bench-cluster   pod start times: rdmanet vs plain pods vs Multus + Whereabouts
CLUSTER_DIR ?= $(CURDIR)/_output/cluster
CLUSTER_FLAGS ?=
CLUSTER_BIN := $(CURDIR)/_output/bin/rdmanet-cluster

.PHONY: cluster-up cluster-down cluster-status test-cluster bench-cluster cluster-bin

cluster-bin:
	@mkdir -p $(dir $(CLUSTER_BIN))
	$(GO) build -o $(CLUSTER_BIN) ./test/cluster/cmd/rdmanet-cluster

cluster-up: cluster-bin
	$(CLUSTER_BIN) up --state-dir $(CLUSTER_DIR) --repo $(CURDIR) $(CLUSTER_FLAGS)

cluster-down: cluster-bin
	$(CLUSTER_BIN) down --state-dir $(CLUSTER_DIR) --repo $(CURDIR)

cluster-status: cluster-bin
	$(CLUSTER_BIN) status --state-dir $(CLUSTER_DIR) --repo $(CURDIR)

# The cluster tier: the tests bring the cluster up themselves (through the
# same binary) and take it down at the end, checking the machine.
test-cluster: cluster-bin
	@mkdir -p $(CURDIR)/_output
	$(GO) vet -tags clustertest ./test/cluster/
	RDMANET_CLUSTER_BIN=$(CLUSTER_BIN) RDMANET_CLUSTER_DIR=$(CLUSTER_DIR) \
	  $(GO) test -tags clustertest -count=1 -timeout 60m -v ./test/cluster/ 2>&1 | tee $(CURDIR)/_output/test-cluster.log; \
	  exit $${PIPESTATUS[0]}
