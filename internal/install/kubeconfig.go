package install

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
)

// ServerURL is the API server URL from KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT (an IPv6 host is bracketed).
func ServerURL(host, port string) (string, error) {
	if host == "" || port == "" {
		return "", fmt.Errorf("KUBERNETES_SERVICE_HOST=%q KUBERNETES_SERVICE_PORT=%q: both must be set (kubelet sets them in every pod); fix: run in a pod or pass --api-server=https://HOST:PORT", host, port)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("KUBERNETES_SERVICE_PORT=%q is not a port number", port)
	}
	return "https://" + net.JoinHostPort(host, port), nil
}

// Kubeconfig is the kubeconfig of one host-side identity: the server, the
// copied CA, and the copied token read with tokenFile (so a rotated token
// takes effect without rewriting it). Values are JSON-quoted (valid YAML).
func Kubeconfig(name, server, caFile, tokenFile string) []byte {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    tokenFile: %s
contexts:
- name: %s
  context:
    cluster: local
    user: %s
current-context: %s
`, q(server), q(caFile), q(name), q(tokenFile), q(name), q(name), q(name))
}
