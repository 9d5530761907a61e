// Package bench measures pod start on the real cluster of test/cluster
// (issues 12 and 26, "Measured"; `make bench-cluster`): the time from a
// pod's creation to the pod Running with its net1, for batches of pods
// created at once and spread evenly over the cluster's nodes, per stack:
//
//	stack=rdmanet             mode=exclusive  a VF per pod through the seed's NAD (sriov + rdma + IPAM)
//	stack=rdmanet             mode=dra        the same, the VF allocated through rdmanet's DRA driver
//	                                          (a ResourceClaimTemplate instead of the extended resource)
//	stack=plain               mode=none       the cluster network only (the baseline)
//	stack=rdmanet             mode=shared     macvlan over the shared HCA's PF + rdmanet-ipam
//	stack=multus+whereabouts  mode=shared     the same pods, with the real Multus v4.2.3 thin plugin,
//	                                          upstream macvlan and Whereabouts v0.9.2 as every node's CNI
//
// Batch k of every row is run k; each stack's added time in a run is its
// batch's p50 less the plain batch's started beside it (same phase, same
// k), and the goal is judged run by run (report.go).
//
// This file holds the pure parts (rows, manifests, configs), report.go the
// percentiles and report lines, both unit-tested without a cluster; run.go,
// agentmode.go and multus.go drive the cluster.
package bench

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Stacks and modes of the rows.
const (
	StackRdmanet = "rdmanet"
	StackPlain   = "plain"
	StackMultus  = "multus+whereabouts"

	ModeExclusive = "exclusive"
	ModeDRA       = "dra"
	ModeNone      = "none"
	ModeShared    = "shared"
)

// Resource names and networks the rows use (the seed's, see examples/).
const (
	VFResource     = "example.com/sriov_rdma"
	SharedResource = "rdma/rdma_shared_device_eth"
	ExclusiveNAD   = "face-training-rdma" // the seed NAD's name
	SharedNAD      = "rdmashared-net"     // the seed's MacvlanNetwork name
	SeedNamespace  = "ai-training"        // the namespace the seed NAD names
	// ClaimTemplate is the dra row's ResourceClaimTemplate: one VF of the
	// seed's pool through deploy/dra's class for it (the class pins the
	// pool the seed NAD's resourceName names).
	ClaimTemplate = "bench-vf"
	VFClass       = "sriov-rdma.example.com"

	// Labels on everything the benchmark creates.
	LabelCreatedBy = "app.kubernetes.io/created-by"
	CreatedBy      = "rdmanet-bench-cluster"
	LabelRow       = "rdmanet-bench/row"
	LabelBatch     = "rdmanet-bench/batch"
)

// Row is one line of the report: a stack in a mode.
type Row struct {
	Stack string
	Mode  string
}

// Key names the row in pod names and labels (DNS-label safe).
func (r Row) Key() string {
	switch {
	case r.Stack == StackPlain:
		return "plain"
	case r.Stack == StackMultus:
		return "multus-" + r.Mode
	default:
		return r.Stack + "-" + r.Mode
	}
}

// Network is the networks annotation the row's pods carry ("" for none).
func (r Row) Network() string {
	switch r.Mode {
	case ModeExclusive, ModeDRA:
		return ExclusiveNAD
	case ModeShared:
		return SharedNAD
	}
	return ""
}

// Resource is the extended resource the row's pods ask one of ("" for none;
// the dra row's VF comes from a claim).
func (r Row) Resource() string {
	switch r.Mode {
	case ModeExclusive:
		return VFResource
	case ModeShared:
		return SharedResource
	}
	return ""
}

// The rows, in the order they run.
var (
	RowExclusive = Row{StackRdmanet, ModeExclusive}
	RowDRA       = Row{StackRdmanet, ModeDRA}
	RowPlain     = Row{StackPlain, ModeNone}
	RowShared    = Row{StackRdmanet, ModeShared}
	RowMultus    = Row{StackMultus, ModeShared}
)

// PodOptions shape the benchmark's pods.
type PodOptions struct {
	Namespace string
	Image     string // the test image, imported into containerd (never pulled)
	Batch     string // label value shared by one batch's pods
	// Spread: the batch's pods spread evenly over the nodes (a topology
	// spread constraint on the node name, max skew 1), so a batch of 48
	// over three nodes is 16 per node whatever the scheduler's scoring.
	Spread bool
}

// Pod is pod i of a batch of row r: the test image sleeping, net1 through
// the row's NAD, one unit of the row's resource (or, row dra, a claim).
// IPC_LOCK and NCCL_SOCKET_IFNAME as the seeds' RDMA pods have them; no
// GPUs (16 pods of the seed's 8 GPUs do not fit).
func Pod(r Row, o PodOptions, i int) *corev1.Pod {
	grace := int64(1)
	c := corev1.Container{
		Name:            "c",
		Image:           o.Image,
		ImagePullPolicy: corev1.PullNever,
		Command:         []string{"sleep", "infinity"},
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-%s-%d", r.Key(), o.Batch, i),
			Namespace: o.Namespace,
			Labels:    map[string]string{LabelCreatedBy: CreatedBy, LabelRow: r.Key(), LabelBatch: o.Batch},
		},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyAlways,
		},
	}
	if n := r.Network(); n != "" {
		p.Annotations = map[string]string{
			"k8s.v1.cni.cncf.io/networks": fmt.Sprintf(`[{"name": %q, "interface": "net1"}]`, n),
		}
		c.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"IPC_LOCK"}}}
		// as a training pod sets it (and the admission webhook asks for)
		c.Env = []corev1.EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=net1"}}
	}
	if res := r.Resource(); res != "" {
		q := resource.MustParse("1")
		c.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceName(res): q},
			Limits:   corev1.ResourceList{corev1.ResourceName(res): q},
		}
	}
	if r.Mode == ModeDRA {
		tmpl := ClaimTemplate
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "vf", ResourceClaimTemplateName: &tmpl}}
		c.Resources.Claims = []corev1.ResourceClaim{{Name: "vf"}}
	}
	p.Spec.Containers = []corev1.Container{c}
	if o.Spread {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelHostname,
			WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{LabelRow: r.Key(), LabelBatch: o.Batch}},
		}}
	}
	return p
}

// ClaimTemplateManifest is the dra row's ResourceClaimTemplate in ns.
func ClaimTemplateManifest(ns string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: %s
  namespace: %s
  labels: {%s: %s}
spec:
  spec:
    devices:
      requests:
        - name: nic
          exactly: {deviceClassName: %s}
`, ClaimTemplate, ns, LabelCreatedBy, CreatedBy, VFClass)
}

// ExclusiveNADManifest is the seed NAD (read from examples/) moved into ns:
// its one "namespace: ai-training" becomes ns, nothing else changes.
func ExclusiveNADManifest(seed, ns string) (string, error) {
	from := "namespace: " + SeedNamespace
	if n := strings.Count(seed, from); n != 1 {
		return "", fmt.Errorf("seed NAD: want exactly one %q, found %d", from, n)
	}
	if !strings.Contains(seed, "k8s.v1.cni.cncf.io/resourceName: "+VFResource) {
		return "", fmt.Errorf("seed NAD: no resourceName annotation %s", VFResource)
	}
	return strings.Replace(seed, from, "namespace: "+ns, 1), nil
}

// SharedNetwork is the shared-mode attachment: the seed's MacvlanNetwork
// rdmashared-net (macvlan child of the RoCE PF, bridge mode, jumbo MTU,
// 192.168.2.0/24 with its gateway), excluding 192.168.2.0/28 where the
// node's PF holds 192.168.2.10. Both shared rows use it; only the IPAM type
// differs.
type SharedNetwork struct {
	Master string // the shared HCA's PF
	IPAM   string // "rdmanet-ipam" or "whereabouts" (the real one in row multus)
}

// NADManifest renders the NAD into ns.
func (s SharedNetwork) NADManifest(ns string) (string, error) {
	cfg := map[string]any{
		"cniVersion": "0.3.1",
		"name":       SharedNAD,
		"type":       "macvlan",
		"master":     s.Master,
		"mode":       "bridge",
		"mtu":        9000,
		"ipam": map[string]any{
			"type":    s.IPAM,
			"range":   "192.168.2.0/24",
			"gateway": "192.168.2.1",
			"exclude": []string{"192.168.2.0/28"},
		},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("shared NAD config: %w", err)
	}
	q, _ := json.Marshal(string(b)) // a JSON string is a valid YAML flow scalar
	return fmt.Sprintf(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: %s
  namespace: %s
  labels: {%s: %s}
spec:
  config: %s
`, SharedNAD, ns, LabelCreatedBy, CreatedBy, q), nil
}

// Node-side paths of the Multus + Whereabouts install (as the node's
// processes see them; the host paths are under the cluster's state dir).
const (
	RdmanetConfFile       = "00-rdmanet.conf"
	MultusKubeconfig      = "/etc/cni/net.d/multus.d/multus.kubeconfig"
	WhereaboutsKubeconfig = "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"
	WhereaboutsFlatConf   = "whereabouts.d/whereabouts.conf" // relative to the conf dir
	MultusCNIDir          = "/var/lib/cni/multus"
)

// MultusConf is the config Multus' own thin entrypoint (cmd/thin_entrypoint
// of v4.2.3, default flags) generates from the node's master network config
// (here the bridge network's conflist): the master inline as the one
// delegate, its capabilities lifted onto Multus, the kubeconfig above;
// for a cniVersion 1.0.0 master a conflist named 00-multus.conflist,
// otherwise a single 00-multus.conf. cniDir and binDir are Multus' defaults,
// spelled out. No readiness indicator, no log file (Multus logs nothing on
// success at its default level).
func MultusConf(master []byte) (name string, conf []byte, err error) {
	var m map[string]any
	if err := json.Unmarshal(master, &m); err != nil {
		return "", nil, fmt.Errorf("master CNI config: %w", err)
	}
	version, _ := m["cniVersion"].(string)
	if version == "" {
		return "", nil, fmt.Errorf("master CNI config has no cniVersion")
	}
	caps := map[string]bool{}
	collect := func(v any) {
		if c, ok := v.(map[string]any); ok {
			for k, on := range c {
				if b, ok := on.(bool); ok {
					caps[k] = b
				}
			}
		}
	}
	if plugins, ok := m["plugins"].([]any); ok {
		for _, p := range plugins {
			if pm, ok := p.(map[string]any); ok {
				collect(pm["capabilities"])
			}
		}
	} else {
		collect(m["capabilities"])
	}
	plugin := map[string]any{
		"type":       "multus",
		"kubeconfig": MultusKubeconfig,
		"delegates":  []any{m},
		"cniDir":     MultusCNIDir,
		"binDir":     "/opt/cni/bin",
	}
	if len(caps) > 0 {
		plugin["capabilities"] = caps
	}
	var out any = plugin
	name = "00-multus.conf"
	if version == "1.0.0" {
		name = "00-multus.conflist"
		out = map[string]any{"cniVersion": version, "name": "multus-cni-network", "plugins": []any{plugin}}
	} else {
		plugin["cniVersion"], plugin["name"] = version, "multus-cni-network"
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return "", nil, fmt.Errorf("multus conf: %w", err)
	}
	return name, append(b, '\n'), nil
}

// WhereaboutsConf is Whereabouts' flat file (whereabouts.d/whereabouts.conf
// in the conf dir), which it reads when a NAD's IPAM config has no
// "kubernetes" block: the kubernetes datastore through the kubeconfig above.
func WhereaboutsConf() ([]byte, error) {
	b, err := json.MarshalIndent(map[string]any{
		"datastore":  "kubernetes",
		"kubernetes": map[string]string{"kubeconfig": WhereaboutsKubeconfig},
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("whereabouts conf: %w", err)
	}
	return append(b, '\n'), nil
}

// Kubeconfig is a self-contained kubeconfig (certificates embedded) for a
// client-certificate identity; Multus and Whereabouts read it from the
// node. No namespace in the context: Whereabouts then keeps its pools and
// lease in kube-system, as installed upstream.
func Kubeconfig(server string, ca, cert, key []byte) []byte {
	e := base64.StdEncoding.EncodeToString
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: bench
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: bench
  context: {cluster: local, user: bench}
current-context: bench
`, server, e(ca), e(cert), e(key)))
}
