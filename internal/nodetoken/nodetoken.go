// Package nodetoken owns the node's API credential on the host: the
// projected, expiring ServiceAccount token of the node's rdmanet pod, copied
// to the file the host-side kubeconfigs read (tokenFile), and the check the
// host-side binaries make before they use it.
//
// The pod's token is bound to the pod (and so to its node: the API server
// adds the user extra authentication.kubernetes.io/node-name) and expires;
// kubelet rotates the projected file at 80% of its lifetime. Refresher
// copies every new version to the host file (mode 0600, atomic replace:
// a reader sees the old token or the new one, whole), so the host file
// always holds a token with at least a fifth of its lifetime left while the
// pod runs. When the pod is gone, the host file expires with its token:
// Check then fails closed, naming the file and the expiry, instead of
// letting the call reach the API server with a dead credential.
package nodetoken

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// ErrExpired is returned (wrapped) by Check for a token past its expiry.
var ErrExpired = errors.New("node token expired")

// Claims are the parts of a ServiceAccount JWT this package reads. The
// signature is not checked: the API server does that; the host only needs
// to know whether sending the token can still succeed.
type Claims struct {
	Expiry   time.Time // zero: the token has no expiry (a legacy Secret token)
	IssuedAt time.Time
	Node     string // kubernetes.io.node.name, set for a token bound to a pod on a node
	Pod      string // kubernetes.io.pod.name
}

// Parse reads the claims of a JWT without verifying it. A token that is not
// a JWT at all is an error naming what is wrong (never the token itself).
func Parse(token []byte) (Claims, error) {
	parts := bytes.Split(bytes.TrimSpace(token), []byte("."))
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("not a JWT (%d dot-separated parts, want 3)", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(string(parts[1]), "="))
	if err != nil {
		return Claims{}, fmt.Errorf("JWT payload is not base64url: %w", err)
	}
	var raw struct {
		Exp *json.Number `json:"exp"`
		Iat *json.Number `json:"iat"`
		K8s *struct {
			Node *struct {
				Name string `json:"name"`
			} `json:"node"`
			Pod *struct {
				Name string `json:"name"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Claims{}, fmt.Errorf("JWT payload is not a JSON object: %w", err)
	}
	var c Claims
	unix := func(n *json.Number, name string) (time.Time, error) {
		if n == nil {
			return time.Time{}, nil
		}
		f, err := n.Float64()
		if err != nil {
			return time.Time{}, fmt.Errorf("JWT claim %s=%s is not a number", name, n.String())
		}
		return time.Unix(int64(f), 0).UTC(), nil
	}
	if c.Expiry, err = unix(raw.Exp, "exp"); err != nil {
		return Claims{}, err
	}
	if c.IssuedAt, err = unix(raw.Iat, "iat"); err != nil {
		return Claims{}, err
	}
	if raw.K8s != nil {
		if raw.K8s.Node != nil {
			c.Node = raw.K8s.Node.Name
		}
		if raw.K8s.Pod != nil {
			c.Pod = raw.K8s.Pod.Name
		}
	}
	return c, nil
}

// Check fails closed when the token in file has expired at now: the error
// names the file, the expiry, how long ago that was, and what refreshes it.
// An empty file name (a kubeconfig without tokenFile), a token that is not
// a JWT or has no expiry passes: the API server is the judge of those.
func Check(file string, now time.Time) error {
	if file == "" {
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("node token %s: %w; fix: the rdmanet-node pod of this node writes it (kubectl -n rdmanet-system get pods -l app.kubernetes.io/name=rdmanet-node -o wide)", file, err)
	}
	c, err := Parse(b)
	if err != nil || c.Expiry.IsZero() {
		return nil
	}
	if !now.Before(c.Expiry) {
		return fmt.Errorf("%w: %s expired at %s (%s ago); the rdmanet-node pod of this node (rdmanet-agent) refreshes it well before expiry while it runs, so it is not running or cannot write the file; fix: kubectl -n rdmanet-system get pods -l app.kubernetes.io/name=rdmanet-node -o wide, and its rdmanet-agent log",
			ErrExpired, file, c.Expiry.Format(time.RFC3339), now.Sub(c.Expiry).Round(time.Second))
	}
	return nil
}
