package burstbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/test/apiserver"
)

// Impls are the meta plugins the bench compares, in the order it runs them.
var Impls = []string{"rdmanet", "multus"}

// Impl is one meta plugin on the node: its daemon, started fresh for every
// row and run, and the network config list the runtime execs its shim with.
type Impl interface {
	Name() string
	// Start starts the daemon (tag names this row and run's files) and
	// returns it once it serves, with the runtime's config list.
	Start(t testing.TB, tag string) (*Daemon, *libcni.NetworkConfigList)
}

// NewImpl returns the named impl on n.
func NewImpl(t testing.TB, n *Node, name string, o Options) Impl {
	t.Helper()
	switch name {
	case "rdmanet":
		return &rdmanetImpl{n: n, args: o.RdmanetDaemonArgs}
	case "multus":
		return newMultus(t, n, o)
	}
	t.Fatalf("impl %q: want one of %s", name, strings.Join(Impls, ", "))
	return nil
}

// rdmanetImpl: the real rdmanet-daemon in the host namespace, and the
// `rdmanet` shim forwarding to it over daemonSocket, as the node runs them
// (deploy/): the daemon runs rdmanet's own delegates in-process and execs
// the others (bridge, macvlan, host-local).
type rdmanetImpl struct {
	n    *Node
	args []string // extra flags of rdmanet-daemon
}

func (*rdmanetImpl) Name() string { return "rdmanet" }

func (r *rdmanetImpl) Start(t testing.TB, tag string) (*Daemon, *libcni.NetworkConfigList) {
	t.Helper()
	n := r.n
	dir := filepath.Join(n.Dir, "rdmanet-"+tag)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0", "name": "rdmanet", "type": "rdmanet", "kubeconfig": n.Kubeconfig,
		"clusterNetwork": "cluster-net", "confDir": filepath.Join(n.Dir, "conf"), "cniDir": filepath.Join(dir, "cni"),
		"binDir": n.BinDir, "podResourcesSocket": n.PRSocket, "deviceInfoDir": filepath.Join(n.Dir, "devinfo"),
		"daemonSocket": filepath.Join(dir, "daemon.sock"),
	}
	confFile := filepath.Join(dir, "rdmanet.conf")
	writeJSON(t, confFile, conf)
	port := freePort(t, n.Host)
	args := append([]string{"--config", confFile, "--node-name", NodeName, "--log-level", "info",
		"--plugin-socket", filepath.Join(dir, "plugins.sock"), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "--ipam-state-dir", ""}, r.args...)
	cmd := exec.Command(filepath.Join(n.BinDir, "rdmanet-daemon"), args...)
	d := startDaemon(t, n.Host, "rdmanet-daemon", cmd, filepath.Join(dir, "daemon.log"), fmt.Sprintf("http://127.0.0.1:%d/metrics", port), os.Interrupt)
	if err := d.waitMetrics(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	// /readyz: the sockets answer and the informer caches are synced
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := d.http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if d.Exited() || time.Now().After(deadline) {
			t.Fatalf("rdmanet-daemon not ready within 60s (%v); log:\n%s", err, d.LogTail(3000))
		}
	}
	raw, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "rdmanet", "plugins": []any{conf}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	return d, l
}

// multusImpl: Multus v4.3.0 thick, the real multus-daemon in the host
// namespace (its config as upstream's daemonset writes it: multusConfigFile
// auto, which generates the shim's config from the node's default network)
// and multus-shim, which the runtime execs with that generated config.
// rdmanet's delegates (sriov, rdma, rdmanet-ipam) run exec'd as Multus runs
// any plugin, doing the whole call themselves (RDMANET_PLUGIN_SOCKET=off).
//
// multus-daemon reads the API with in-cluster credentials only (or a
// per-node certificate through CSRs): it runs in a mount namespace of its
// own in which a service account token of the bench's API server and its
// CA are bind-mounted at the in-cluster path, KUBERNETES_SERVICE_HOST/PORT
// naming the relay in the host namespace. The token's service account is
// bound to cluster-admin (a bench, not a deployment).
type multusImpl struct {
	n                  *Node
	daemonBin, shimBin string
	saDir              string
	connLimit          int
}

func newMultus(t testing.TB, n *Node, o Options) *multusImpl {
	t.Helper()
	m := &multusImpl{n: n, connLimit: o.MultusConnectionLimit}
	m.daemonBin, m.shimBin = FindTool(t, "multus-daemon"), FindTool(t, "multus-shim")
	if err := os.Symlink(m.shimBin, filepath.Join(n.BinDir, "multus-shim")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	m.saDir = filepath.Join(n.Dir, "multus-sa")
	if err := os.MkdirAll(m.saDir, 0o755); err != nil {
		t.Fatal(err)
	}
	token := serviceAccountToken(t, n)
	ca, err := os.ReadFile(n.API.Config().TLSClientConfig.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte("kube-system")} {
		if err := os.WriteFile(filepath.Join(m.saDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// the mount point of the in-cluster credentials (made here if absent,
	// removed again at cleanup; nothing is mounted on it outside the
	// daemon's own mount namespace)
	made := mkdirAllTracked(t, inClusterDir)
	t.Cleanup(func() { removeMade(made) })
	if n.VFs > 0 {
		n.PR.ServeAtKubeletPath(t)
	}
	return m
}

const inClusterDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func (*multusImpl) Name() string { return "multus" }

func (m *multusImpl) Start(t testing.TB, tag string) (*Daemon, *libcni.NetworkConfigList) {
	t.Helper()
	n := m.n
	dir := filepath.Join(n.Dir, "multus-"+tag)
	confDir := filepath.Join(dir, "net.d")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "00-cluster.conflist"), n.DefaultNet, 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, n.Host)
	conf := map[string]any{
		"cniVersion": "1.0.0", "logLevel": "error", "logFile": filepath.Join(dir, "multus.log"),
		"cniConfigDir": confDir, "multusAutoconfigDir": confDir, "multusConfigFile": "auto",
		// the daemon's socket, and the shim's in the config it generates
		"socketDir": filepath.Join(dir, "run"), "daemonSocketDir": filepath.Join(dir, "run"), "metricsPort": port,
		"binDir": n.BinDir, "cniDir": filepath.Join(dir, "cache"), "confDir": confDir,
	}
	if m.connLimit > 0 {
		conf["connectionLimit"] = m.connLimit
	}
	confFile := filepath.Join(dir, "daemon-config.json")
	writeJSON(t, confFile, conf)
	_, relayPort, _ := strings.Cut(n.RelayAddr, ":")
	cmd := exec.Command("/bin/sh", "-c", `mount --bind "$0" "$1" && exec "$2" -config "$3"`, m.saDir, inClusterDir, m.daemonBin, confFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes / private in it first
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT="+relayPort,
		"MULTUS_NODE_NAME="+NodeName, "RDMANET_PLUGIN_SOCKET=off")
	d := startDaemon(t, n.Host, "multus-daemon", cmd, filepath.Join(dir, "daemon.out"), fmt.Sprintf("http://127.0.0.1:%d/metrics", port), syscall.SIGTERM)
	if err := d.waitMetrics(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Serving starts after its informers synced: /healthz over the socket
	sock := filepath.Join(dir, "run", "multus.sock")
	c := &http.Client{Timeout: 2 * time.Second, Transport: unixTransport(sock)}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := c.Post("http://multus/healthz", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			break
		}
		if d.Exited() || time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "multus.log"))
			t.Fatalf("multus-daemon not serving %s within 60s (%v); output:\n%s\nlog:\n%s", sock, err, d.LogTail(3000), tailBytes(b, 3000))
		}
	}
	// the shim's config, as the daemon generated it for the runtime
	var l *libcni.NetworkConfigList
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		gen, _ := filepath.Glob(filepath.Join(confDir, "00-multus.conf*"))
		if len(gen) == 1 {
			var err error
			if l, err = confListFromFile(gen[0]); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("multus-daemon wrote no shim config in %s within 30s; output:\n%s", confDir, d.LogTail(3000))
		}
	}
	return d, l
}

func confListFromFile(path string) (*libcni.NetworkConfigList, error) {
	if strings.HasSuffix(path, ".conflist") {
		return libcni.ConfListFromFile(path)
	}
	c, err := libcni.ConfFromFile(path)
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromConf(c)
}

func tailBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// serviceAccountToken makes service account kube-system/multus a
// cluster-admin and returns a token of it.
func serviceAccountToken(t testing.TB, n *Node) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "multus", Namespace: "kube-system"}}
	if _, err := n.Core.CoreV1().ServiceAccounts("kube-system").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-burst-multus"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "multus", Namespace: "kube-system"}}}
	if _, err := n.Core.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	exp := int64(24 * 3600)
	tr, err := n.Core.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "multus",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of kube-system/multus: %v", err)
	}
	return tr.Status.Token
}

// FindTool finds a tool hack/build-*.sh built: $RDMANET_TOOLS_BIN,
// $TOOLS_BIN or <repo>/.tools/bin. Missing, the bench fails with the fix.
func FindTool(t testing.TB, name string) string {
	t.Helper()
	var dirs []string
	for _, env := range []string{apiserver.EnvToolsBin, "TOOLS_BIN"} {
		if v := os.Getenv(env); v != "" {
			dirs = append(dirs, v)
		}
	}
	if root, err := apiserver.RepoRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, ".tools", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Fatalf("%s not found in %s: build it with hack/build-multus-thick.sh (make multus-thick-tool)", name, strings.Join(dirs, ", "))
	return ""
}
