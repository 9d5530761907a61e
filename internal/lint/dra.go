package lint

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// Dynamic Resource Allocation (resource.k8s.io/v1, docs/dra.md): pods that
// take their RDMA NIC (and GPUs) from a ResourceClaim or ResourceClaimTemplate
// instead of device plugin limits. A request is an RDMA NIC when its
// DeviceClass (in the input, or one of deploy/dra's well-known classes)
// selects rdmanet's driver; the class's kind attribute tells the mode, its
// k8s.cni.cncf.io/resourceName selector the pool. The meta CNI ties a claim's
// device to the NAD whose k8s.v1.cni.cncf.io/resourceName equals the device's
// k8s.cni.cncf.io/resourceName attribute (the pool's resource name).

// DRA names.
const (
	DRADriver         = "rdma.rdmanet.io"
	PCIeRootAttribute = "resource.kubernetes.io/pcieRoot"
	draGroup          = "resource.k8s.io"
)

// draClass is what lint knows of a DeviceClass.
type draClass struct {
	name   string
	obj    *manifest.Object // nil for a well-known class not in the input
	driver string           // the driver its CEL selector requires ("" unknown)
	kind   string           // exclusive, shared ("" any/unknown)
	pool   string           // the resourceName its selector pins ("" none)
	gpu    bool
}

func (c *draClass) rdma() bool { return c != nil && c.driver == DRADriver }

func (c *draClass) where() string {
	if c.obj != nil {
		return "DeviceClass in the input"
	}
	if c.gpu {
		return "well-known GPU class"
	}
	return "well-known class of deploy/dra"
}

// wellKnownClasses are deploy/dra's classes (and NVIDIA's GPU class), used
// when the input does not carry them.
var wellKnownClasses = map[string]draClass{
	"rdma-exclusive.rdmanet.io":   {driver: DRADriver, kind: resExclusive},
	"rdma-shared.rdmanet.io":      {driver: DRADriver, kind: resShared},
	"sriov-rdma.example.com":      {driver: DRADriver, kind: resExclusive, pool: "example.com/sriov_rdma"},
	"rdma-shared-device-eth.rdma": {driver: DRADriver, kind: resShared, pool: "rdma/rdma_shared_device_eth"},
	"gpu.nvidia.com":              {driver: "gpu.nvidia.com", gpu: true},
	"mig.nvidia.com":              {driver: "gpu.nvidia.com", gpu: true},
}

var (
	celDriver = regexp.MustCompile(`device\.driver\s*==\s*["']([^"']+)["']`)
	celKind   = regexp.MustCompile(`device\.attributes\[["']rdma\.rdmanet\.io["']\](?:\.kind|\[["']kind["']\])\s*==\s*["']([a-z]+)["']`)
	celPool   = regexp.MustCompile(`device\.attributes\[["']k8s\.cni\.cncf\.io["']\](?:\.resourceName|\[["']resourceName["']\])\s*==\s*["']([^"']+)["']`)
)

// celFacts reads what lint needs from CEL selectors.
func celFacts(sels []resourcev1.DeviceSelector) (driver, kind, pool string) {
	for _, s := range sels {
		if s.CEL == nil {
			continue
		}
		e := s.CEL.Expression
		if m := celDriver.FindStringSubmatch(e); m != nil && driver == "" {
			driver = m[1]
		}
		if m := celKind.FindStringSubmatch(e); m != nil && kind == "" {
			kind = m[1]
		}
		if m := celPool.FindStringSubmatch(e); m != nil && pool == "" {
			pool = m[1]
		}
	}
	return driver, kind, pool
}

func gpuClassName(name string) bool {
	l := strings.ToLower(name)
	return strings.Contains(l, "gpu") || strings.HasSuffix(l, ".nvidia.com") && !strings.Contains(l, "nic")
}

// draRequest is one request of a claim.
type draRequest struct {
	name    string
	field   string
	classes []string // exactly's class, or every firstAvailable alternative's
	class   *draClass
	count   int64 // devices; 0 with allocationMode All
	all     bool
	nic     bool // an RDMA NIC of rdmanet's driver
	gpu     bool
	unknown bool   // class neither in the input nor well known
	kind    string // exclusive, shared, "" unknown
	pool    string // the pool the class or the request's selectors pin
}

func (r *draRequest) devices() string {
	if r.all {
		return "all matching devices"
	}
	return plural(int(r.count), "device")
}

// draClaim is a ResourceClaim or ResourceClaimTemplate of the input.
type draClaim struct {
	obj       *manifest.Object
	specField string // "spec" (claim) or "spec.spec" (template)
	spec      resourcev1.ResourceClaimSpec
	reqs      []*draRequest
}

func (c *draClaim) request(name string) *draRequest {
	name, _, _ = strings.Cut(name, "/")
	for _, r := range c.reqs {
		if r.name == name {
			return r
		}
	}
	return nil
}

func (in *inputIndex) indexDRA() error {
	in.classes = map[string]*draClass{}
	for _, o := range in.objs {
		if o.Group() != draGroup {
			continue
		}
		switch o.Kind {
		case "DeviceClass":
			var dc resourcev1.DeviceClass
			if err := manifest.Decode(o, &dc); err != nil {
				return err
			}
			c := &draClass{name: o.Name, obj: o}
			c.driver, c.kind, c.pool = celFacts(dc.Spec.Selectors)
			c.gpu = c.driver != DRADriver && (strings.HasPrefix(c.driver, "gpu.") || gpuClassName(o.Name))
			in.classes[o.Name] = c
		case "ResourceClaim", "ResourceClaimTemplate":
			dc := &draClaim{obj: o, specField: "spec"}
			if o.Kind == "ResourceClaim" {
				var rc resourcev1.ResourceClaim
				if err := manifest.Decode(o, &rc); err != nil {
					return err
				}
				dc.spec = rc.Spec
			} else {
				var rct resourcev1.ResourceClaimTemplate
				if err := manifest.Decode(o, &rct); err != nil {
					return err
				}
				dc.spec, dc.specField = rct.Spec.Spec, "spec.spec"
			}
			in.claims = append(in.claims, dc)
		}
	}
	for _, dc := range in.claims {
		for _, r := range dc.spec.Devices.Requests {
			dc.reqs = append(dc.reqs, in.newDRARequest(dc, r))
		}
	}
	return nil
}

func (in *inputIndex) draClass(name string) *draClass {
	if c, ok := in.classes[name]; ok {
		return c
	}
	if wk, ok := wellKnownClasses[name]; ok {
		wk.name = name
		return &wk
	}
	if gpuClassName(name) {
		return &draClass{name: name, gpu: true}
	}
	return nil
}

func (in *inputIndex) newDRARequest(dc *draClaim, r resourcev1.DeviceRequest) *draRequest {
	dr := &draRequest{name: r.Name, field: fmt.Sprintf("%s.devices.requests[%s]", dc.specField, r.Name), count: 1}
	type alt struct {
		class string
		sels  []resourcev1.DeviceSelector
		mode  resourcev1.DeviceAllocationMode
		count int64
	}
	var alts []alt
	if e := r.Exactly; e != nil {
		alts = append(alts, alt{e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count})
	}
	for _, s := range r.FirstAvailable {
		alts = append(alts, alt{s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count})
	}
	for i, a := range alts {
		dr.classes = append(dr.classes, a.class)
		c := in.draClass(a.class)
		_, kind, pool := celFacts(a.sels)
		if i == 0 {
			dr.class = c
			switch {
			case a.mode == resourcev1.DeviceAllocationModeAll:
				dr.all, dr.count = true, 0
			case a.count > 0:
				dr.count = a.count
			}
		}
		switch {
		case c == nil:
			dr.unknown = true
		case c.rdma():
			dr.nic = true
			if kind == "" {
				kind = c.kind
			}
			if pool == "" {
				pool = c.pool
			}
			// The request's pool and kind hold only when every
			// alternative agrees.
			if i == 0 || dr.pool == pool {
				dr.pool = pool
			} else {
				dr.pool = ""
			}
			if i == 0 || dr.kind == kind {
				dr.kind = kind
			} else {
				dr.kind = ""
			}
		case c.gpu:
			dr.gpu = true
		}
	}
	return dr
}

// podClaim is one entry of a pod's spec.resourceClaims.
type podClaim struct {
	name  string
	ref   string // "ResourceClaimTemplate x" as the pod names it
	field string
	claim *draClaim // nil when not in the input
}

func (in *inputIndex) findClaim(kind, name, ns string) *draClaim {
	for _, c := range in.claims {
		if c.obj.Kind == kind && c.obj.Name == name && nsMatch(c.obj.Namespace, ns) {
			return c
		}
	}
	return nil
}

// resolveClaims links the pod's claims to the input and marks the
// containers that take RDMA NICs or GPUs from them.
func (w *workload) resolveClaims() {
	for _, pc := range w.t.Spec.ResourceClaims {
		p := podClaim{name: pc.Name, field: w.t.Field("spec.resourceClaims[" + pc.Name + "]")}
		switch {
		case pc.ResourceClaimName != nil && *pc.ResourceClaimName != "":
			p.ref = "ResourceClaim " + *pc.ResourceClaimName
			p.claim = w.in.findClaim("ResourceClaim", *pc.ResourceClaimName, w.ns)
		case pc.ResourceClaimTemplateName != nil && *pc.ResourceClaimTemplateName != "":
			p.ref = "ResourceClaimTemplate " + *pc.ResourceClaimTemplateName
			p.claim = w.in.findClaim("ResourceClaimTemplate", *pc.ResourceClaimTemplateName, w.ns)
		default:
			continue
		}
		w.claims = append(w.claims, p)
	}
	for _, ct := range w.ctrs {
		for _, ref := range ct.c.Resources.Claims {
			pc := w.podClaim(ref.Name)
			if pc == nil || pc.claim == nil {
				continue
			}
			for _, r := range pc.claim.reqs {
				if ref.Request != "" && r.name != strings.SplitN(ref.Request, "/", 2)[0] {
					continue
				}
				if r.nic {
					ct.draNIC = true
				}
				if r.gpu {
					ct.draGPUs += r.count
				}
			}
		}
	}
}

func (w *workload) podClaim(name string) *podClaim {
	for i := range w.claims {
		if w.claims[i].name == name {
			return &w.claims[i]
		}
	}
	return nil
}

// nicUse is a NIC request of one of the pod's claims.
type nicUse struct {
	pc  *podClaim
	req *draRequest
}

func (u nicUse) String() string {
	return fmt.Sprintf("request %s of %s (class %s)", u.req.name, u.pc.claim.obj.Ref(), strings.Join(u.req.classes, " | "))
}

func (w *workload) draNICs() []nicUse {
	var out []nicUse
	for i := range w.claims {
		pc := &w.claims[i]
		if pc.claim == nil {
			continue
		}
		for _, r := range pc.claim.reqs {
			if r.nic {
				out = append(out, nicUse{pc, r})
			}
		}
	}
	return out
}

// draMaybeNIC: a claim lint cannot see, or a request of a class it does not
// know, may give the pod its NIC.
func (w *workload) draMaybeNIC() bool {
	for _, pc := range w.claims {
		if pc.claim == nil {
			return true
		}
		for _, r := range pc.claim.reqs {
			if r.unknown {
				return true
			}
		}
	}
	return false
}

// draCovers tells whether the pod's claims may give it a device of pool rn:
// a NIC request pinned to rn, or one not pinned to any pool, or a claim lint
// cannot see.
func (w *workload) draCovers(rn string) bool {
	if w.draMaybeNIC() {
		return true
	}
	for _, u := range w.draNICs() {
		if u.req.pool == "" || u.req.pool == rn {
			return true
		}
	}
	return false
}

// noteClaims adds the claims' evidence and records in seen the mode of each
// NIC they request.
func (w *workload) noteClaims(seen *modeEvidence) {
	for i := range w.claims {
		pc := &w.claims[i]
		if pc.claim == nil {
			w.note("claim %s → %s (not in the input: its devices cannot be told)", pc.name, pc.ref)
			continue
		}
		var gpus []string
		for _, r := range pc.claim.reqs {
			switch {
			case r.nic:
				pool := "any pool"
				if r.pool != "" {
					pool = "pool " + r.pool
				}
				kind := "kind " + r.kind
				if r.kind == "" {
					kind = "any kind"
				}
				w.note("claim %s → %s request %s: class %s (%s) selects driver %s, %s, %s: %s, %s", pc.name, pc.claim.obj.Ref(), r.name, strings.Join(r.classes, " | "), r.class.where(), DRADriver, kind, pool, kindWord(r.kind), r.devices())
				seen.add(r.kind)
			case r.gpu:
				gpus = append(gpus, fmt.Sprintf("%s (%s)", r.name, r.devices()))
			case r.unknown:
				w.note("claim %s → %s request %s: class %s is not in the input and not well known (not told an RDMA NIC)", pc.name, pc.claim.obj.Ref(), r.name, strings.Join(r.classes, " | "))
			}
		}
		if len(gpus) > 0 {
			w.note("claim %s → %s GPU requests %s", pc.name, pc.claim.obj.Ref(), strings.Join(gpus, ", "))
		}
	}
}

// RDMA090: GPU and NIC requests of one claim not aligned pairwise on the
// PCIe root.
func (c *checker) checkClaims() {
	c.cur = -1
	for _, dc := range c.in.claims {
		var gpus, nics []*draRequest
		var nGPU, nNIC int64
		for _, r := range dc.reqs {
			switch {
			case r.nic:
				nics = append(nics, r)
				nNIC += r.count
			case r.gpu:
				gpus = append(gpus, r)
				nGPU += r.count
			}
		}
		if len(gpus) == 0 || len(nics) == 0 {
			continue
		}
		consField := dc.specField + ".devices.constraints"
		paired := map[string]bool{} // requests in a good pairing constraint
		var wide []string
		for i, con := range dc.spec.Devices.Constraints {
			if con.MatchAttribute == nil || string(*con.MatchAttribute) != PCIeRootAttribute {
				continue
			}
			names := con.Requests
			if len(names) == 0 {
				for _, r := range dc.reqs {
					names = append(names, r.name)
				}
			}
			var g, n int64
			var gAll, nAll bool
			var members []*draRequest
			for _, name := range names {
				r := dc.request(name)
				if r == nil {
					continue
				}
				members = append(members, r)
				switch {
				case r.nic:
					n += r.count
					nAll = nAll || r.all
				case r.gpu:
					g += r.count
					gAll = gAll || r.all
				}
			}
			if (g == 0 && !gAll) || (n == 0 && !nAll) {
				continue
			}
			if (g > 1 || gAll) && (n > 1 || nAll) {
				var parts []string
				for _, m := range members {
					parts = append(parts, m.name+" ("+m.devices()+")")
				}
				wide = append(wide, fmt.Sprintf("constraints[%d] over %s", i, strings.Join(parts, ", ")))
				continue
			}
			for _, m := range members {
				paired[m.name] = true
			}
		}
		// The side with fewer devices must be paired entirely.
		side, what := nics, "NIC"
		if nGPU < nNIC {
			side, what = gpus, "GPU"
		}
		var unpaired []string
		for _, r := range side {
			if !paired[r.name] {
				unpaired = append(unpaired, r.name)
			}
		}
		pairwise := "one request pair per GPU/NIC pair (gpu-0 + nic-0, gpu-1 + nic-1, …, count 1 each) and one constraint {requests: [gpu-i, nic-i], matchAttribute: " + PCIeRootAttribute + "} per pair, as examples/dra/gpu-nic-aligned-x8.yaml does (kubectl rdma render --dra writes it)"
		gpuNames, nicNames := reqNames(gpus), reqNames(nics)
		switch {
		case len(wide) > 0:
			c.add("RDMA090", dc.obj, consField, fmt.Sprintf("%s: %s makes every device of the named requests share one %s value, i.e. all %d GPUs and %d NICs under a single PCIe root; unless one root really holds them all (for 8+8 no server does) the claim is never allocated, or the scheduler times out searching", dc.obj.Ref(), strings.Join(wide, "; "), PCIeRootAttribute, nGPU, nNIC), "split the requests into "+pairwise)
		case len(unpaired) > 0 && len(paired) == 0:
			c.add("RDMA090", dc.obj, consField, fmt.Sprintf("%s requests GPUs (%s) and RDMA NICs (%s) without a matchAttribute %s constraint pairing them; the scheduler takes any GPU and any NIC of the node and hands out pairs under different PCIe roots (GPUDirect RDMA then crosses the CPU interconnect)", dc.obj.Ref(), gpuNames, nicNames, PCIeRootAttribute), "add "+pairwise)
		case len(unpaired) > 0:
			c.add("RDMA090", dc.obj, consField, fmt.Sprintf("%s: %s request(s) %s are in no matchAttribute %s constraint with a %s request; those devices may sit under another PCIe root than their partner", dc.obj.Ref(), what, strings.Join(unpaired, ", "), PCIeRootAttribute, map[string]string{"NIC": "GPU", "GPU": "NIC"}[what]), "pair each of them: "+pairwise)
		}
	}
}

func reqNames(rs []*draRequest) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.name+" ("+r.devices()+")")
	}
	return strings.Join(out, ", ")
}

// RDMA091, RDMA092, RDMA093
func (c *checker) checkDRA(w *workload) {
	haveClaims := len(w.in.claims) > 0
	for _, pc := range w.claims {
		if pc.claim != nil {
			continue
		}
		kind, name, _ := strings.Cut(pc.ref, " ")
		if haveClaims {
			c.add("RDMA093", w.obj, pc.field, fmt.Sprintf("pod claim %q names %s, which is not in the input (namespace %q); the pod cannot be scheduled until it exists", pc.name, manifest.Ref(kind, w.ns, name), orDefault(w.ns)), fmt.Sprintf("create %s %s in namespace %q, or fix the name in %s", kind, name, orDefault(w.ns), pc.field))
		} else {
			c.addSev("RDMA093", Info, w.obj, pc.field, fmt.Sprintf("pod claim %q names %s, which is not in the input, so its devices (RDMA NIC? GPU alignment?) cannot be checked", pc.name, manifest.Ref(kind, w.ns, name)), "lint the ResourceClaim(Template) and its DeviceClasses together with the workload")
		}
	}
	nics := w.draNICs()
	if len(nics) == 0 || w.hostNetwork() || w.netsKey != manifest.NetworksAnnotation {
		return
	}
	dpRes := map[string]bool{}
	for _, r := range w.rdmaResources() {
		dpRes[r.name] = true
	}
	for _, n := range w.nets {
		if n.nad == nil {
			continue
		}
		rn := n.nad.ResourceName
		if rn == "" {
			kind := nadKind(n.nad)
			if kind == "" {
				continue
			}
			msg := fmt.Sprintf("network %q (%s) takes its device from the pod's DRA claim (%s), but the NAD has no %s annotation; the meta CNI ties a claim's device to the NAD whose resourceName equals the device's k8s.cni.cncf.io/resourceName attribute, so it finds no device for this network", n.sel.Name, n.nad.Ref(), nics[0], manifest.ResourceNameAnnotation)
			fix := fmt.Sprintf("annotate %s with %s: <pool resource name> (the pool the NIC request's class selects%s)", n.nad.Ref(), manifest.ResourceNameAnnotation, poolHint(nics))
			if kind == resShared {
				c.addSev("RDMA091", Warning, w.obj, n.field, msg+"; the macvlan attaches anyway, but nothing checks that the claimed HCA is the one under its master (RoCE GIDs of another NIC)", fix)
			} else {
				c.add("RDMA091", w.obj, n.field, msg+"; the sriov step gets no deviceID and CNI ADD fails", fix)
			}
			continue
		}
		if dpRes[rn] || w.draMaybeNIC() {
			continue
		}
		var pinned, other []string
		var unpinned []nicUse
		for _, u := range nics {
			switch u.req.pool {
			case rn:
				pinned = append(pinned, u.req.name)
			case "":
				unpinned = append(unpinned, u)
			default:
				other = append(other, fmt.Sprintf("%s → %s", u.req.name, u.req.pool))
			}
		}
		if len(pinned) > 0 {
			continue
		}
		fix := fmt.Sprintf("give the NIC request a DeviceClass that pins the pool (selector device.driver == %q && device.attributes[\"k8s.cni.cncf.io\"].resourceName == %q; kubectl rdma render --dra writes one), or add that selector to the request's exactly.selectors", DRADriver, rn)
		if len(unpinned) == 0 {
			c.addSev("RDMA092", Error, w.obj, nics[0].pc.field, fmt.Sprintf("network %q (%s) needs a device of pool %s, but the pod's NIC requests pin other pools (%s); the meta CNI finds no device of %s and CNI ADD fails", n.sel.Name, n.nad.Ref(), rn, strings.Join(other, ", "), rn), fix)
			continue
		}
		u := unpinned[0]
		c.add("RDMA092", w.obj, u.pc.field, fmt.Sprintf("network %q (%s) needs a device of pool %s, but %s does not pin that pool (it selects %s devices of driver %s in any pool); the scheduler may allocate a device of another pool and the attachment then fails", n.sel.Name, n.nad.Ref(), rn, u, cmp.Or(u.req.kind, "all"), DRADriver), fix)
	}
}

func poolHint(nics []nicUse) string {
	for _, u := range nics {
		if u.req.pool != "" {
			return ": " + u.req.pool
		}
	}
	return ""
}

// draUsesOf lists, per NAD resource name, the NIC devices the pod's claims
// pin to that pool, for RDMA016.
func (w *workload) draPinned(rn string) (int64, string) {
	var n int64
	var field string
	for _, u := range w.draNICs() {
		if u.req.pool == rn && !u.req.all {
			n += u.req.count
			if field == "" {
				field = u.pc.field
			}
		}
	}
	return n, field
}
