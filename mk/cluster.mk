# Real multi-node cluster (issues 12, 26): a control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, CoreDNS) and NODES
# nodes (kubelet, kube-proxy, containerd v2.4.2, runc v1.4.0 each), every
# node in network and mount namespaces of its own, joined by a fabric
# namespace (test/cluster, docs/cluster.md). Root.
#
#   sudo make cluster-up [NODES=3] [SHARED_NODES=1]
#                             build what is missing, start, install rdmanet; prints export KUBECONFIG=...
#   sudo make cluster-down    stop everything and check the machine is as before
#   sudo make test-cluster    the single-node scenarios: up (NODES=1) -> scenarios -> down (make test)
#   sudo make test-cluster-multi
#                             the cross-node scenarios: up (NODES=4, SHARED_NODES=2) -> scenarios -> down (make test)
#   sudo make bench-cluster   pod start times: rdmanet vs plain pods vs Multus + Whereabouts
CLUSTER_DIR ?= $(CURDIR)/_output/cluster
NODES ?= 3
SHARED_NODES ?=
CLUSTER_FLAGS ?= --nodes $(NODES) $(if $(SHARED_NODES),--shared-nodes $(SHARED_NODES))
CLUSTER_BIN := $(CURDIR)/_output/bin/rdmanet-cluster

.PHONY: cluster-up cluster-down cluster-node-down cluster-node-up cluster-status test-cluster test-cluster-multi test-cluster-health bench-cluster cluster-bin

cluster-bin:
	@mkdir -p $(dir $(CLUSTER_BIN))
	$(GO) build -o $(CLUSTER_BIN) ./test/cluster/cmd/rdmanet-cluster

cluster-up: cluster-bin
	$(CLUSTER_BIN) up --state-dir $(CLUSTER_DIR) --repo $(CURDIR) $(CLUSTER_FLAGS)

cluster-down: cluster-bin
	$(CLUSTER_BIN) down --state-dir $(CLUSTER_DIR) --repo $(CURDIR)

# A node's crash and return (issue 26): NODE=rdmanet-node-2 (any node but the first).
cluster-node-down: cluster-bin
	$(CLUSTER_BIN) node-down --state-dir $(CLUSTER_DIR) --repo $(CURDIR) $(NODE)

cluster-node-up: cluster-bin
	$(CLUSTER_BIN) node-up --state-dir $(CLUSTER_DIR) --repo $(CURDIR) $(NODE)

cluster-status: cluster-bin
	$(CLUSTER_BIN) status --state-dir $(CLUSTER_DIR) --repo $(CURDIR)

# The cluster tier: the tests bring the cluster up themselves (through the
# same binary) and take it down at the end, checking the machine.
test-cluster: cluster-bin
	@mkdir -p $(CURDIR)/_output
	$(GO) vet -tags clustertest ./test/cluster/
	RDMANET_CLUSTER_BIN=$(CLUSTER_BIN) RDMANET_CLUSTER_DIR=$(CLUSTER_DIR) RDMANET_CLUSTER_NODES=1 \
	  $(GO) test -tags clustertest -count=1 -timeout 60m -v -run 'TestCluster$$|TestKubeletConfig' ./test/cluster/ 2>&1 | tee $(CURDIR)/_output/test-cluster.log; \
	  exit $${PIPESTATUS[0]}

# Device health in pod status (KEP-4680) on the real node: its own tier
# until it has run reliably in CI (then it joins make test).
test-cluster-health: cluster-bin
	@mkdir -p $(CURDIR)/_output
	$(GO) vet -tags clustertest ./test/cluster/
	RDMANET_CLUSTER_BIN=$(CLUSTER_BIN) RDMANET_CLUSTER_DIR=$(CLUSTER_DIR) RDMANET_CLUSTER_NODES=1 \
	  $(GO) test -tags clustertest -count=1 -timeout 30m -v -run 'TestClusterHealth' ./test/cluster/ 2>&1 | tee $(CURDIR)/_output/test-cluster-health.log; \
	  exit $${PIPESTATUS[0]}

# The cross-node tier: four nodes (two exclusive, two shared): DNS and
# Services through CoreDNS and kube-proxy on every node, the seed's
# exclusive Job and the shared Job each with its ranks on two nodes and
# bytes across net1, kubectl rdma verify's pair matrix, node loss and return.
test-cluster-multi: cluster-bin
	@mkdir -p $(CURDIR)/_output
	$(GO) vet -tags clustertest ./test/cluster/
	RDMANET_CLUSTER_BIN=$(CLUSTER_BIN) RDMANET_CLUSTER_DIR=$(CLUSTER_DIR) RDMANET_CLUSTER_NODES=4 RDMANET_CLUSTER_SHARED_NODES=2 \
	  $(GO) test -tags clustertest -count=1 -timeout 60m -v -run 'TestMultiNode' ./test/cluster/ 2>&1 | tee $(CURDIR)/_output/test-cluster-multi.log; \
	  exit $${PIPESTATUS[0]}
