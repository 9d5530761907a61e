package controller_test

// deploy/controller against the code and a real API server: every file is
// listed, every object is accepted (strict fields, server dry run), the
// Deployment runs this binary with flags it accepts, and the RBAC grants
// what the controller does and no more.

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/controller"
	"github.com/rdmanet/rdmanet/internal/image"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// kustomization returns the deploy/controller files deploy/kustomization.yaml
// lists (relative to deploy/controller), after checking it lists every
// manifest of the directory.
func kustomization(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir(t), "..", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Images     []any    `json:"images"`
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil || k.Kind != "Kustomization" {
		t.Fatalf("deploy/kustomization.yaml: %v (kind %q)", err, k.Kind)
	}
	files, _ := filepath.Glob(filepath.Join(deployDir(t), "*.yaml"))
	var onDisk []string
	for _, f := range files {
		onDisk = append(onDisk, filepath.Base(f))
	}
	var listed []string
	for _, r := range k.Resources {
		if f, ok := strings.CutPrefix(r, "controller/"); ok {
			listed = append(listed, f)
		}
	}
	sort.Strings(listed)
	if !slices.Equal(listed, onDisk) {
		t.Fatalf("deploy/kustomization.yaml lists %v of deploy/controller, the directory has %v", listed, onDisk)
	}
	return listed
}

func TestDeployManifests(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
	var deploy *appsv1.Deployment
	var svc *corev1.Service
	webhookConfigs := 0
	for _, file := range kustomization(t) {
		for _, doc := range docs(t, file) {
			switch kind := kindOf(doc); kind {
			case "Deployment":
				deploy = &appsv1.Deployment{}
				if err := yaml.UnmarshalStrict(doc, deploy); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				if _, err := e.admin.AppsV1().Deployments(deploy.Namespace).Create(ctx, deploy, dry); err != nil {
					t.Fatalf("%s: the API server refuses the Deployment: %v", file, err)
				}
			case "Service":
				svc = &corev1.Service{}
				if err := yaml.UnmarshalStrict(doc, svc); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				if _, err := e.admin.CoreV1().Services(svc.Namespace).Create(ctx, svc, dry); err != nil {
					t.Fatalf("%s: the API server refuses the Service: %v", file, err)
				}
			case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
				if file != "webhooks.yaml" {
					t.Errorf("%s: %s belongs in webhooks.yaml (generated: go test ./internal/webhook -run TestManifestsUpToDate -update)", file, kind)
				}
				webhookConfigs++
				// Generated from the webhook package's Go types and checked
				// against them by TestManifestsUpToDate; the API server
				// checks them here.
				var err error
				if kind == "MutatingWebhookConfiguration" {
					var m admissionregistrationv1.MutatingWebhookConfiguration
					if err = yaml.UnmarshalStrict(doc, &m); err == nil {
						_, err = e.admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &m, dry)
					}
				} else {
					var v admissionregistrationv1.ValidatingWebhookConfiguration
					if err = yaml.UnmarshalStrict(doc, &v); err == nil {
						_, err = e.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &v, dry)
					}
				}
				if err != nil {
					t.Fatalf("%s: the API server refuses the %s: %v", file, kind, err)
				}
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
				if file != "rbac.yaml" {
					t.Errorf("%s: %s belongs in rbac.yaml", file, kind)
				}
				// Created (strictly) by setup's applyRBAC.
			default:
				t.Errorf("%s: unexpected kind %q", file, kind)
			}
		}
	}
	if webhookConfigs != 2 {
		t.Errorf("deploy/controller has %d webhook configurations, want the mutating and the validating one (webhooks.yaml)", webhookConfigs)
	}
	if deploy == nil || svc == nil {
		t.Fatalf("deploy/controller has no Deployment (%v) or Service (%v)", deploy != nil, svc != nil)
	}
	if deploy.Namespace != controller.DefaultNamespace || deploy.Spec.Template.Spec.ServiceAccountName != "rdmanet-controller" {
		t.Errorf("Deployment %s/%s runs as %q, want namespace %s, ServiceAccount rdmanet-controller", deploy.Namespace, deploy.Name, deploy.Spec.Template.Spec.ServiceAccountName, controller.DefaultNamespace)
	}
	if r := deploy.Spec.Replicas; r == nil || *r < 2 {
		t.Errorf("Deployment replicas %v: want 2 (leader election)", r)
	}
	pod := deploy.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	// The image's binary of this command.
	if want := image.BinDir + "/rdmanet-controller"; len(c.Command) != 1 || c.Command[0] != want {
		t.Errorf("command %v, want [%s]", c.Command, want)
	}
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", filepath.Base(c.Command[0]), "main.go")); err != nil {
		t.Errorf("command %s is not a cmd/ of this repository (make image builds ./cmd/...): %v", c.Command[0], err)
	}
	if !strings.HasPrefix(c.Image, image.Repository+":") {
		t.Errorf("image %s, want %s:<version>", c.Image, image.Repository)
	}
	// The args are flags the binary accepts.
	o, err := controller.ParseFlags(c.Args, io.Discard)
	if err != nil {
		t.Fatalf("Deployment args %v: %v", c.Args, err)
	}
	if !o.LeaderElect {
		t.Error("Deployment runs without leader election")
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, addr := range map[string]string{"health": o.HealthAddr, "metrics": o.MetricsAddr} {
		_, port, _ := net.SplitHostPort(addr)
		if port == "" || port != strconv.Itoa(int(ports[name])) {
			t.Errorf("container port %q = %d, the flag serves %s", name, ports[name], addr)
		}
	}
	for probe, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.StrVal != "health" {
			t.Errorf("%s probe %+v: want an HTTP GET on port health", probe, p)
		}
	}
	if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("probes must be /healthz (liveness) and /readyz (readiness)")
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, drop ALL", sc)
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext: want runAsNonRoot")
	}
	tolerated := false
	for _, tol := range pod.Tolerations {
		tolerated = tolerated || tol.Key == "node-role.kubernetes.io/control-plane"
	}
	if !tolerated {
		t.Error("the Deployment does not tolerate control-plane nodes")
	}
	if !o.Webhooks || ports["webhook"] != int32(o.WebhookPort) {
		t.Errorf("Deployment serves webhooks=%t on %d, its container port webhook is %d", o.Webhooks, o.WebhookPort, ports["webhook"])
	}
	// The Service reaches the webhook port.
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || ports[svc.Spec.Ports[0].TargetPort.StrVal] != 9443 {
		t.Errorf("Service ports %+v: want 443 → the container's webhook port 9443", svc.Spec.Ports)
	}
	for k, v := range svc.Spec.Selector {
		if pod := deploy.Spec.Template.Labels[k]; pod != v {
			t.Errorf("Service selector %s=%s does not select the Deployment's pods", k, v)
		}
	}
}

// TestRBAC asks the API server what deploy/controller/rbac.yaml lets the
// controller do: what it needs, and not more.
func TestRBAC(t *testing.T) {
	e := setup(t)
	ns := controller.DefaultNamespace
	tests := []struct {
		name  string
		attr  authzv1.ResourceAttributes
		allow bool
	}{
		{name: "watch pods", attr: authzv1.ResourceAttributes{Verb: "watch", Resource: "pods"}, allow: true},
		{name: "list pods", attr: authzv1.ResourceAttributes{Verb: "list", Resource: "pods"}, allow: true},
		{name: "delete pods", attr: authzv1.ResourceAttributes{Verb: "delete", Resource: "pods", Namespace: "default"}},
		{name: "update pods", attr: authzv1.ResourceAttributes{Verb: "update", Resource: "pods", Namespace: "default"}},
		{name: "patch nodes", attr: authzv1.ResourceAttributes{Verb: "patch", Resource: "nodes"}, allow: true},
		{name: "update nodes", attr: authzv1.ResourceAttributes{Verb: "update", Resource: "nodes"}},
		{name: "delete nodes", attr: authzv1.ResourceAttributes{Verb: "delete", Resource: "nodes"}},
		{name: "update ipamblocks", attr: authzv1.ResourceAttributes{Verb: "update", Group: "rdmanet.io", Resource: "ipamblocks"}, allow: true},
		{name: "delete ipamblocks", attr: authzv1.ResourceAttributes{Verb: "delete", Group: "rdmanet.io", Resource: "ipamblocks"}, allow: true},
		{name: "create ipamblocks", attr: authzv1.ResourceAttributes{Verb: "create", Group: "rdmanet.io", Resource: "ipamblocks"}},
		{name: "create events", attr: authzv1.ResourceAttributes{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: "default"}, allow: true},
		{name: "update own lease", attr: authzv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: controller.LeaseName}, allow: true},
		{name: "update another lease", attr: authzv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: "other"}},
		{name: "leases elsewhere", attr: authzv1.ResourceAttributes{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system"}},
		{name: "read the agent config", attr: authzv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: ns, Name: controller.AgentConfigMap}, allow: true},
		{name: "read other configmaps", attr: authzv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: ns, Name: "rdmanet-node-config"}},
		{name: "read the webhook cert", attr: authzv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: ns, Name: "rdmanet-controller-webhook-certs"}, allow: true},
		{name: "read other secrets", attr: authzv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: ns, Name: "rdmanet-daemon-token"}},
		{name: "list all secrets", attr: authzv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: ns}},
		{name: "get a NAD (webhooks)", attr: authzv1.ResourceAttributes{Verb: "get", Group: "k8s.cni.cncf.io", Resource: "network-attachment-definitions", Namespace: "default", Name: "rdma"}, allow: true},
		{name: "update a NAD", attr: authzv1.ResourceAttributes{Verb: "update", Group: "k8s.cni.cncf.io", Resource: "network-attachment-definitions", Namespace: "default", Name: "rdma"}},
		{name: "patch own webhook config", attr: authzv1.ResourceAttributes{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: "rdmanet-controller"}, allow: true},
		{name: "update own validating config", attr: authzv1.ResourceAttributes{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "rdmanet-controller"}, allow: true},
		{name: "patch another webhook config", attr: authzv1.ResourceAttributes{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: "other"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			attr := tc.attr
			sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: controllerSA,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}, ResourceAttributes: &attr}}
			got, err := e.admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Allowed != tc.allow {
				t.Errorf("%+v: allowed=%t, want %t (%s)", tc.attr, got.Status.Allowed, tc.allow, got.Status.Reason)
			}
		})
	}
}
