package lint

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

type envVar struct {
	name    string
	value   string
	literal bool // value given inline (not valueFrom)
	field   string
	ctr     *container
}

type resReq struct {
	name  string
	kind  string // resExclusive, resShared, resRDMA, resGPU, resOther
	pool  *manifest.Pool
	limit int64
	field string
	ctr   *container
}

type container struct {
	c          *corev1.Container
	field      string // full field path of the container
	env        map[string]envVar
	res        []resReq // extended resources with a limit
	draNIC     bool     // takes an RDMA NIC from a DRA claim
	draGPUs    int64    // GPUs from DRA claims
	ipcLock    bool
	privileged bool
	capAll     bool
	nonRoot    bool
}

func (c *container) rdma() []resReq {
	var out []resReq
	for _, r := range c.res {
		if r.kind == resExclusive || r.kind == resShared || r.kind == resRDMA {
			out = append(out, r)
		}
	}
	return out
}

type attachedNet struct {
	sel   manifest.NetworkSelection
	nad   *manifest.NAD
	other []*manifest.NAD // same name in other namespaces
	field string
}

type workload struct {
	in       *inputIndex
	t        *manifest.PodTemplate
	obj      *manifest.Object
	ns       string
	netsKey  string
	netField string
	nets     []attachedNet
	netsErr  error
	claims   []podClaim // spec.resourceClaims
	ctrs     []*container
	mode     string
	evidence []string
}

func (w *workload) hostNetwork() bool { return w.t.Spec.HostNetwork }

func newWorkload(in *inputIndex, t *manifest.PodTemplate) *workload {
	w := &workload{in: in, t: t, obj: t.Owner, ns: t.Namespace()}
	// Networks annotation: Multus key first, then vendor keys.
	for _, key := range []string{manifest.NetworksAnnotation, manifest.TKENetworksAnnotation} {
		v, ok := t.Meta.Annotations[key]
		if !ok {
			continue
		}
		w.netsKey = key
		w.netField = t.Field("metadata.annotations[" + key + "]")
		sels, err := manifest.ParseNetworks(key, v)
		if err != nil {
			w.netsErr = err
			break
		}
		for _, s := range sels {
			an := attachedNet{sel: s, field: w.netField}
			if key == manifest.NetworksAnnotation {
				an.nad, an.other = in.findNAD(s, w.ns)
			}
			w.nets = append(w.nets, an)
		}
		break
	}
	for i := range t.Spec.Containers {
		w.ctrs = append(w.ctrs, newContainer(in, t, &t.Spec.Containers[i]))
	}
	w.resolveClaims()
	w.decideMode()
	return w
}

func newContainer(in *inputIndex, t *manifest.PodTemplate, c *corev1.Container) *container {
	ct := &container{c: c, field: t.Field(fmt.Sprintf("spec.containers[%s]", c.Name)), env: map[string]envVar{}}
	ns := t.Namespace()
	// Precedence as in a running container: envFrom, then env, then
	// variables the command's shell script exports before exec'ing.
	for i, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		data := in.configMapData(ef.ConfigMapRef.Name, ns)
		for k, v := range data {
			name := ef.Prefix + k
			ct.env[name] = envVar{name: name, value: v, literal: true, field: fmt.Sprintf("%s.envFrom[%d] (ConfigMap %s data[%s])", ct.field, i, ef.ConfigMapRef.Name, k), ctr: ct}
		}
	}
	for _, e := range c.Env {
		ev := envVar{name: e.Name, value: e.Value, literal: e.ValueFrom == nil, field: ct.field + ".env[" + e.Name + "]", ctr: ct}
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			ref := e.ValueFrom.ConfigMapKeyRef
			if v, ok := in.configMapData(ref.Name, ns)[ref.Key]; ok {
				ev.value, ev.literal = v, true
				ev.field += fmt.Sprintf(" (ConfigMap %s data[%s])", ref.Name, ref.Key)
			}
		}
		ct.env[e.Name] = ev
	}
	for _, ev := range scriptEnv(c, ct) {
		ct.env[ev.name] = ev
	}
	for name, q := range c.Resources.Limits {
		n := string(name)
		if !isExtendedResource(n) {
			continue
		}
		kind, pool := in.resourceKind(n)
		ct.res = append(ct.res, resReq{name: n, kind: kind, pool: pool, limit: q.Value(), field: ct.field + ".resources.limits[" + n + "]", ctr: ct})
	}
	// Stable order.
	for i := 1; i < len(ct.res); i++ {
		for j := i; j > 0 && ct.res[j].name < ct.res[j-1].name; j-- {
			ct.res[j], ct.res[j-1] = ct.res[j-1], ct.res[j]
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.Privileged != nil && *sc.Privileged {
			ct.privileged = true
		}
		if sc.Capabilities != nil {
			for _, cap := range sc.Capabilities.Add {
				switch strings.ToUpper(strings.TrimPrefix(string(cap), "CAP_")) {
				case "IPC_LOCK":
					ct.ipcLock = true
				case "ALL":
					ct.capAll = true
				}
			}
		}
	}
	ct.nonRoot = runsAsNonRoot(t.Spec.SecurityContext, c.SecurityContext)
	return ct
}

func runsAsNonRoot(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) bool {
	var uid *int64
	var nonRoot *bool
	if pod != nil {
		uid, nonRoot = pod.RunAsUser, pod.RunAsNonRoot
	}
	if c != nil {
		if c.RunAsUser != nil {
			uid = c.RunAsUser
		}
		if c.RunAsNonRoot != nil {
			nonRoot = c.RunAsNonRoot
		}
	}
	if uid != nil {
		return *uid != 0
	}
	return nonRoot != nil && *nonRoot
}

// env returns the first literal value of a variable over the containers,
// preferring RDMA containers.
func (w *workload) env(name string) (envVar, bool) {
	for _, c := range w.rdmaContainers() {
		if e, ok := c.env[name]; ok && e.literal {
			return e, true
		}
	}
	for _, c := range w.ctrs {
		if e, ok := c.env[name]; ok && e.literal {
			return e, true
		}
	}
	return envVar{}, false
}

// rdmaContainers are the containers the RDMA rules apply to: those that
// request an RDMA resource; else those with NCCL settings; else those with
// GPUs; else all.
func (w *workload) rdmaContainers() []*container {
	pick := func(f func(*container) bool) []*container {
		var out []*container
		for _, c := range w.ctrs {
			if f(c) {
				out = append(out, c)
			}
		}
		return out
	}
	if cs := pick(func(c *container) bool { return len(c.rdma()) > 0 || c.draNIC }); len(cs) > 0 {
		return cs
	}
	if cs := pick(func(c *container) bool {
		for k := range c.env {
			if strings.HasPrefix(k, "NCCL_") {
				return true
			}
		}
		return false
	}); len(cs) > 0 {
		return cs
	}
	if cs := pick(func(c *container) bool {
		for _, r := range c.res {
			if r.kind == resGPU {
				return true
			}
		}
		return c.draGPUs > 0
	}); len(cs) > 0 {
		return cs
	}
	return w.ctrs
}

func (w *workload) rdmaResources() []resReq {
	var out []resReq
	for _, c := range w.ctrs {
		out = append(out, c.rdma()...)
	}
	return out
}

func (w *workload) gpus() int64 {
	var n int64
	for _, c := range w.ctrs {
		for _, r := range c.res {
			if r.kind == resGPU {
				n += r.limit
			}
		}
		n += c.draGPUs
	}
	return n
}

// ibDisabled reports NCCL_IB_DISABLE=1 or NCCL_NET=Socket.
func (w *workload) ibDisabled() (envVar, bool) {
	if e, ok := w.env("NCCL_IB_DISABLE"); ok {
		v := strings.TrimSpace(e.value)
		if v != "" && v != "0" && !strings.EqualFold(v, "false") {
			return e, true
		}
	}
	if e, ok := w.env("NCCL_NET"); ok && strings.EqualFold(strings.TrimSpace(e.value), "Socket") {
		return e, true
	}
	return envVar{}, false
}

// interfaces of the pod: eth0, lo and the secondary interfaces.
func (w *workload) interfaces() []string {
	out := []string{"eth0"}
	for _, n := range w.nets {
		if n.sel.Interface != "" {
			out = append(out, n.sel.Interface)
		}
	}
	return out
}

func (w *workload) secondaryIfaces() []string {
	var out []string
	for _, n := range w.nets {
		if n.sel.Interface != "" {
			out = append(out, n.sel.Interface)
		}
	}
	return out
}

func (w *workload) hasIPCLock() bool {
	for _, c := range w.rdmaContainers() {
		if c.ipcLock || c.capAll {
			return true
		}
	}
	return false
}

func (w *workload) note(format string, args ...any) {
	w.evidence = append(w.evidence, fmt.Sprintf(format, args...))
}

// decideMode decides the workload's RDMA mode from the evidence the seeds
// name (Seed 2, 10.3 and 十二; Seed 3, 二): resources, networks annotation
// and its @ifname, hostNetwork, NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE,
// NCCL_IB_HCA, IPC_LOCK.
func (w *workload) decideMode() {
	if w.t.Path != "" {
		if w.t.Role != "" {
			w.note("pod template %s (%s)", w.t.Path, w.t.Role)
		} else {
			w.note("pod template %s", w.t.Path)
		}
	}
	var seen modeEvidence
	if w.hostNetwork() {
		w.note("hostNetwork: true (pod shares the node's netns and sees its RDMA NICs)")
	}
	for _, r := range w.rdmaResources() {
		switch {
		case r.pool != nil:
			w.note("requests %s: %d from %s pool %s %s", r.name, r.limit, r.pool.Kind, r.pool.Obj.Ref(), r.pool.Field)
		default:
			w.note("requests %s: %d (%s by name; no pool for it in the input)", r.name, r.limit, kindWord(r.kind))
		}
		seen.add(r.kind)
	}
	w.noteClaims(&seen)
	for _, n := range w.nets {
		label := n.sel.Name
		if n.sel.Namespace != "" {
			label = n.sel.Namespace + "/" + label
		}
		if n.nad != nil {
			types := make([]string, 0, len(n.nad.Config.PluginsOrEmpty()))
			for _, p := range n.nad.Config.PluginsOrEmpty() {
				types = append(types, p.Type)
			}
			w.note("network %s@%s → %s (%s)", label, ifaceOrUnknown(n.sel.Interface), n.nad.Ref(), strings.Join(types, " → "))
			if k := nadKind(n.nad); k != "" {
				seen.add(k)
			}
		} else if len(n.other) > 0 {
			w.note("network %s@%s (%s; NAD only in namespace %s)", label, ifaceOrUnknown(n.sel.Interface), w.netsKey, n.other[0].Namespace)
		} else {
			w.note("network %s@%s (%s; NAD not in the input)", label, ifaceOrUnknown(n.sel.Interface), w.netsKey)
		}
	}
	var rdmaCtrs []string
	for _, c := range w.rdmaContainers() {
		if c.ipcLock {
			rdmaCtrs = append(rdmaCtrs, c.c.Name)
		}
	}
	if len(rdmaCtrs) > 0 {
		w.note("IPC_LOCK in container %s (memory registration: RDMA in use)", strings.Join(rdmaCtrs, ", "))
	}
	ifname, hasIfname := w.env("NCCL_SOCKET_IFNAME")
	if hasIfname {
		w.note("NCCL_SOCKET_IFNAME=%q", ifname.value)
	}
	hca, hasHCA := w.env("NCCL_IB_HCA")
	if hasHCA {
		w.note("NCCL_IB_HCA=%q", hca.value)
	}
	disabledVar, disabled := w.ibDisabled()
	if e, ok := w.env("NCCL_IB_DISABLE"); ok && !disabled {
		w.note("NCCL_IB_DISABLE=%q (IB/RoCE transport enabled)", e.value)
	}
	if disabled {
		w.note("%s=%q (NCCL uses TCP sockets)", disabledVar.name, disabledVar.value)
	}
	_, hasGID := w.env("NCCL_IB_GID_INDEX")
	rdmaIntent := len(rdmaCtrs) > 0 || hasHCA || hasGID || len(w.rdmaResources()) > 0 || len(w.draNICs()) > 0 || w.hasDevInfiniband()

	switch {
	case disabled:
		w.mode = ModeTCP
	case w.hostNetwork():
		if rdmaIntent || hasIfname {
			w.mode = ModeHost
		} else {
			w.note("no RDMA device, IPC_LOCK or NCCL IB setting: cannot tell whether RDMA is used")
			w.mode = ModeUnknown
		}
	case seen.exclusive && seen.shared:
		w.note("conflicting evidence: both exclusive (VF) and shared-HCA resources/networks")
		w.mode = ModeUnknown
	case seen.exclusive:
		w.mode = ModeExclusive
	case seen.shared:
		w.mode = ModeShared
	case len(w.nets) > 0 || seen.unknown:
		// No pool or NAD tells the model; fall back to the seed's fingerprint:
		// NCCL_SOCKET_IFNAME naming the inserted interface means a VF was
		// moved into the pod (Seed 2, 10.3).
		if hasIfname && selectsAny(ifname.value, w.secondaryIfaces()) {
			w.note("NCCL_SOCKET_IFNAME selects the inserted interface %s: the SR-IOV VF route (seed 2, 10.3)", strings.Join(matching(ifname.value, w.secondaryIfaces()), ","))
			w.mode = ModeExclusive
		} else {
			w.mode = ModeUnknown
		}
	case rdmaIntent:
		w.note("RDMA settings but no RDMA device or secondary network: the pod's own netns has no RDMA NIC")
		w.mode = ModeUnknown
	default:
		w.note("no RDMA resource, secondary network or hostNetwork: NCCL will use TCP sockets")
		w.mode = ModeTCP
	}
}

func (w *workload) hasDevInfiniband() bool {
	for _, v := range w.t.Spec.Volumes {
		if v.HostPath != nil && strings.HasPrefix(v.HostPath.Path, "/dev/infiniband") {
			return true
		}
	}
	return false
}

func (w *workload) privileged() bool {
	for _, c := range w.rdmaContainers() {
		if c.privileged {
			return true
		}
	}
	return false
}

// modeEvidence is what the devices and networks a workload gets tell of its
// RDMA attachment mode.
type modeEvidence struct{ exclusive, shared, unknown bool }

// add records a device of resource kind k: resExclusive, resShared, or any
// other kind, an RDMA device whose mode is not told.
func (m *modeEvidence) add(k string) {
	switch k {
	case resExclusive:
		m.exclusive = true
	case resShared:
		m.shared = true
	default:
		m.unknown = true
	}
}

func kindWord(k string) string {
	switch k {
	case resExclusive:
		return "exclusive VF"
	case resShared:
		return "shared HCA"
	}
	return "RDMA"
}

func ifaceOrUnknown(s string) string {
	if s == "" {
		return "<vendor default>"
	}
	return s
}

// scriptAssign matches NAME=value assignments of the variables lint reads in
// an inline shell script ("export NCCL_IB_DISABLE=1; torchrun ...").
var scriptAssign = regexp.MustCompile(`(?:^|[\s;&|(])(?:export\s+)?(NCCL_[A-Z0-9_]+|MASTER_ADDR|MASTER_PORT)=("[^"]*"|'[^']*'|[^\s;&|)]*)`)

// scriptEnv returns the assignments found in the container's command and args.
func scriptEnv(c *corev1.Container, ct *container) []envVar {
	var out []envVar
	scan := func(kind string, parts []string) {
		for i, p := range parts {
			for _, m := range scriptAssign.FindAllStringSubmatch(p, -1) {
				v := strings.Trim(m[2], `"'`)
				if strings.Contains(v, "$") {
					continue // computed at run time
				}
				out = append(out, envVar{name: m[1], value: v, literal: true, field: fmt.Sprintf("%s.%s[%d] (%s=%s in the script)", ct.field, kind, i, m[1], v), ctr: ct})
			}
		}
	}
	scan("command", c.Command)
	scan("args", c.Args)
	return out
}
