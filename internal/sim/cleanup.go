package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// CleanupResult says what --cleanup did.
type CleanupResult struct {
	Found   bool   `json:"found"`
	Pods    int    `json:"pods"`
	Cleanup string `json:"cleanup"` // "clean", or what leaked
}

// Cleanup detaches the pods of a demo kept up with --keep (or left behind
// by a run that died) with CNI DEL, deletes their namespaces, compares the
// simulated hosts with the state recorded before the pods came, and removes
// the simulated nodes and the work dir.
func Cleanup(ctx context.Context, workDir string, progressW io.Writer) (*CleanupResult, error) {
	if progressW == nil {
		progressW = io.Discard
	}
	if err := CheckPrereqs(); err != nil {
		return nil, &PrereqError{Err: err}
	}
	workDir, err := filepath.Abs(workDir)
	if err != nil {
		return nil, err
	}
	st, found, err := ReadState(workDir)
	if err != nil {
		return nil, err
	}
	res := &CleanupResult{Found: found, Cleanup: "clean"}
	if !found {
		return res, nil
	}
	if !st.Kept && st.PID != os.Getpid() && pidAlive(st.PID) {
		return nil, &BusyError{WorkDir: workDir, State: st}
	}
	pr := &progress{w: progressW, start: time.Now()}
	l := st.Layout
	l.WorkDir = workDir
	res.Pods = len(st.Pods)
	var problems []string
	for _, d := range st.Nodes {
		host, err := openNamedNS(l.hostNS(d.Name))
		if err != nil {
			problems = append(problems, fmt.Sprintf("node %s: host netns gone, its pods cannot be detached: %v", d.Name, err))
			continue
		}
		c, list, err := d.cniRunner(l)
		if err != nil {
			host.Close()
			return nil, err
		}
		for _, p := range st.Pods {
			if p.Node != d.Name || p.Netns == "" {
				continue
			}
			netnsPath := NetnsPath(p.Netns)
			if _, err := os.Stat(netnsPath); err != nil {
				netnsPath = "" // DEL still runs: it must succeed without the netns
			}
			err := host.Do(func(ns.NetNS) error {
				return c.DelNetworkList(ctx, list, runtimeConf(p.ContainerID, netnsPath, p.Namespace, p.Name, p.UID))
			})
			if err != nil {
				problems = append(problems, fmt.Sprintf("CNI DEL of pod %s/%s: %v", p.Namespace, p.Name, err))
			}
			if err := deleteNamedNS(p.Netns); err != nil {
				problems = append(problems, err.Error())
			}
		}
		host.Close()
	}
	pr.printf("detached %d pods", len(st.Pods))
	if st.Before != nil {
		after := HostState{Nodes: map[string]NodeState{}}
		for _, d := range st.Nodes {
			host, herr := openNamedNS(l.hostNS(d.Name))
			wire, werr := openNamedNS(l.wireNS(d.Name))
			if herr != nil || werr != nil {
				problems = append(problems, fmt.Sprintf("node %s: namespaces gone before the check (%v %v)", d.Name, herr, werr))
				if host != nil {
					host.Close()
				}
				if wire != nil {
					wire.Close()
				}
				continue
			}
			s, err := snapshotNode(d, l, host, wire, netops.NewRecorder(filepath.Join(l.nodeDir(d.Name), "netops.json")), st.RDMA[d.Name])
			host.Close()
			wire.Close()
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			after.Nodes[d.Name] = s
		}
		if len(after.Nodes) == len(st.Before.Nodes) {
			problems = append(problems, st.Before.Diff(after)...)
		}
	}
	var terr []string
	for _, d := range st.Nodes {
		if err := teardownNode(d, l); err != nil {
			terr = append(terr, err.Error())
		}
	}
	for _, p := range st.Pods {
		if p.Netns != "" {
			_ = deleteNamedNS(p.Netns)
		}
	}
	if len(terr) > 0 {
		return nil, fmt.Errorf("remove the simulated nodes: %s", strings.Join(terr, "; "))
	}
	if err := os.RemoveAll(workDir); err != nil {
		return nil, fmt.Errorf("remove %s: %w", workDir, err)
	}
	res.Cleanup = verdict(problems)
	pr.printf("simulated nodes and %s removed", workDir)
	if res.Cleanup != "clean" {
		return res, errors.New(res.Cleanup)
	}
	return res, nil
}
