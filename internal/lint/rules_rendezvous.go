package lint

import (
	"cmp"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
)

// parseMasterAddr splits a MASTER_ADDR DNS name into (pod host, service,
// namespace). ok is false for IPs, variable references and names that are
// not cluster Service names.
func (in *inputIndex) parseMasterAddr(w *workload, v, podNS string) (host, svc, ns string, ok bool) {
	v = strings.TrimSuffix(strings.TrimSpace(v), ".")
	if v == "" || net.ParseIP(v) != nil || strings.ContainsAny(v, "$(){}") || v == "localhost" {
		return "", "", "", false
	}
	for _, suf := range []string{".svc.cluster.local", ".cluster.local", ".svc"} {
		if strings.HasSuffix(v, suf) {
			v = strings.TrimSuffix(v, suf)
			break
		}
	}
	parts := strings.Split(v, ".")
	switch len(parts) {
	case 1:
		return "", parts[0], podNS, true
	case 2:
		// "<pod host>.<service>" or "<service>.<namespace>": a pod hostname of
		// this workload, its subdomain/serviceName, or an existing Service
		// decide.
		if in.findService(parts[1], podNS) != nil || parts[1] == w.t.Spec.Subdomain || parts[1] == w.stringAt("spec.serviceName") ||
			(strings.HasPrefix(parts[0], w.obj.Name+"-") && indexSuffix.MatchString(strings.TrimPrefix(parts[0], w.obj.Name))) {
			return parts[0], parts[1], podNS, true
		}
		return "", parts[0], parts[1], true
	case 3:
		return parts[0], parts[1], parts[2], true
	}
	return "", "", "", false
}

var indexSuffix = regexp.MustCompile(`^-\d+$`)

// RDMA080-084
func (c *checker) checkRendezvous(w *workload) {
	e, ok := w.env("MASTER_ADDR")
	if !ok {
		return
	}
	host, svcName, ns, ok := w.in.parseMasterAddr(w, e.value, w.ns)
	if !ok {
		return
	}
	s := w.in.findService(svcName, ns)
	if s == nil {
		c.add("RDMA083", w.obj, e.field, fmt.Sprintf("MASTER_ADDR=%q names %s, which is not in the input; the headless Service, its selector and the pods' subdomain cannot be checked", e.value, refOrNS("Service", ns, svcName)), "")
		return
	}
	if s.spec.ClusterIP != "None" {
		ip := s.spec.ClusterIP
		if ip == "" {
			ip = "unset (a virtual IP is allocated)"
		}
		c.add("RDMA080", s.obj, "spec.clusterIP", fmt.Sprintf("Service %s is the rendezvous address of %s (MASTER_ADDR=%q) but clusterIP is %s; rank 0 must resolve to the pod itself, not a load-balanced virtual IP", s.obj.Name, w.obj.Ref(), e.value, ip), "set spec.clusterIP: None")
	}
	labels := w.t.Meta.Labels
	auto, strict := w.autoLabels()
	var bad []string
	for k, v := range s.spec.Selector {
		got, has := labels[k]
		switch {
		case has && got != v:
			bad = append(bad, fmt.Sprintf("%s=%s (pods have %s)", k, v, got))
		case !has && !auto[k] && strict:
			bad = append(bad, fmt.Sprintf("%s=%s (pods do not carry %s)", k, v, k))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		c.add("RDMA081", s.obj, "spec.selector", fmt.Sprintf("Service %s is the rendezvous address of %s but its selector matches none of its pods: %s", s.obj.Name, w.obj.Ref(), strings.Join(bad, "; ")), "make the selector a subset of the pod template's labels")
	}
	if host == "" {
		return
	}
	if s.spec.ClusterIP == "None" && !s.spec.PublishNotReadyAddresses {
		c.add("RDMA084", s.obj, "spec.publishNotReadyAddresses", fmt.Sprintf("Service %s gives pod hostnames (MASTER_ADDR=%q) but does not publish not-ready addresses; members cannot resolve each other until they are Ready", s.obj.Name, e.value), "")
	}
	switch {
	case w.obj.Kind == "StatefulSet":
		if sn := w.stringAt("spec.serviceName"); sn != svcName {
			c.add("RDMA082", w.obj, "spec.serviceName", fmt.Sprintf("MASTER_ADDR=%q is a pod hostname under Service %s, but the StatefulSet's serviceName is %q", e.value, svcName, sn), fmt.Sprintf("set spec.serviceName: %s", svcName))
		} else if !indexSuffix.MatchString(strings.TrimPrefix(host, w.obj.Name)) || !strings.HasPrefix(host, w.obj.Name) {
			c.add("RDMA082", w.obj, e.field, fmt.Sprintf("MASTER_ADDR host %q is not a pod of StatefulSet %s (pods are %s-<ordinal>)", host, w.obj.Name, w.obj.Name), fmt.Sprintf("use %s-0.%s", w.obj.Name, svcName))
		}
	case w.obj.Kind == "Pod" || (w.obj.Kind == "Job" && w.obj.Group() == "batch") || w.t.Spec.Subdomain != "":
		if w.t.Spec.Subdomain != svcName {
			c.add("RDMA082", w.obj, w.t.Field("spec.subdomain"), fmt.Sprintf("MASTER_ADDR=%q is a pod hostname under Service %s, but the pods' spec.subdomain is %q; no DNS record %s.%s exists", e.value, svcName, w.t.Spec.Subdomain, host, svcName), fmt.Sprintf("set spec.subdomain: %s", svcName))
			return
		}
		if w.obj.Kind == "Job" && w.obj.Group() == "batch" {
			indexed := w.stringAt("spec.completionMode") == "Indexed"
			if !indexed || !strings.HasPrefix(host, w.obj.Name) || !indexSuffix.MatchString(strings.TrimPrefix(host, w.obj.Name)) {
				why := "only Indexed Jobs give pods the hostname <job>-<index>"
				if indexed {
					why = fmt.Sprintf("the Job's pods are named %s-<index>", w.obj.Name)
				}
				c.add("RDMA082", w.obj, e.field, fmt.Sprintf("MASTER_ADDR host %q: %s", host, why), fmt.Sprintf("set spec.completionMode: Indexed and MASTER_ADDR=%s-0.%s", w.obj.Name, svcName))
			}
		}
		if w.obj.Kind == "Pod" {
			hn := cmp.Or(w.t.Spec.Hostname, w.obj.Name)
			if hn != host {
				c.add("RDMA082", w.obj, e.field, fmt.Sprintf("MASTER_ADDR host %q is not this pod's hostname %q", host, hn), "")
			}
		}
	}
}

// autoLabels are labels controllers add to pods; strict tells whether a
// selector key missing from the template is certainly missing on the pods
// (false for operator CRDs that add their own labels).
func (w *workload) autoLabels() (map[string]bool, bool) {
	m := map[string]bool{}
	strict := true
	switch {
	case w.obj.Kind == "Job" && w.obj.Group() == "batch", w.obj.Kind == "CronJob":
		for _, k := range []string{"job-name", "batch.kubernetes.io/job-name", "controller-uid", "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-completion-index"} {
			m[k] = true
		}
	case w.obj.Kind == "StatefulSet":
		for _, k := range []string{"statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index", "controller-revision-hash"} {
			m[k] = true
		}
	case w.obj.Kind == "Deployment" || w.obj.Kind == "ReplicaSet":
		m["pod-template-hash"] = true
	case w.obj.Kind == "DaemonSet":
		m["controller-revision-hash"], m["pod-template-generation"] = true, true
	case w.obj.Kind == "Pod":
	default:
		strict = false
	}
	return m, strict
}

func (w *workload) stringAt(path string) string {
	v, _ := getPath(w.obj.Data, path)
	s, _ := v.(string)
	return s
}

func getPath(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func refOrNS(kind, ns, name string) string {
	if ns == "" {
		return kind + "/" + name
	}
	return kind + "/" + ns + "/" + name
}
