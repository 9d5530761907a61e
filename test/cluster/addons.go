package cluster

import (
	"context"
	"fmt"
	"io"
)

// addonsManifest is what a cluster's installer adds besides the control
// plane: CoreDNS's read-only role, and the kube-dns Service in front of
// CoreDNS, which runs as a process on the first node (not as a pod: the
// Service has no selector and its EndpointSlice names the node's address).
// kube-proxy on every node turns the Service's ClusterIP into that address.
func addonsManifest(dns bool) string {
	m := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: rdmanet-cluster:coredns
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: rdmanet-cluster:coredns
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: rdmanet-cluster:coredns}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: %s}
`, CoreDNSUser)
	if !dns {
		return m
	}
	return m + fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  clusterIP: %[1]s
  ports:
    - {name: dns, port: 53, protocol: UDP, targetPort: 53}
    - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-coredns
  namespace: kube-system
  labels:
    kubernetes.io/service-name: kube-dns
    endpointslice.kubernetes.io/managed-by: rdmanet-cluster
addressType: IPv4
endpoints:
  - addresses: [%[2]s]
    conditions: {ready: true}
    nodeName: %[3]s
ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`, DNSServiceIP, NodeIP, NodeName)
}

// applyAddons applies addonsManifest once the API server is up (before
// CoreDNS starts: its readiness needs the role).
func (l Layout) applyAddons(ctx context.Context, k Kubectl, dns bool, out io.Writer) error {
	if err := k.Apply(ctx, addonsManifest(dns)); err != nil {
		return fmt.Errorf("cluster add-ons (CoreDNS role, kube-dns Service): %w", err)
	}
	if dns {
		fmt.Fprintf(out, "  kube-system/kube-dns %s -> CoreDNS on %s:53\n", DNSServiceIP, NodeIP)
	}
	return nil
}
