// Command testplugin is a CNI plugin for rdmanet's tests, never installed
// on a node: its behaviour comes from its network config, so a test can
// make a delegate fail or hang in a real libcni run.
//
//	"failDelWhile": path   DEL fails (CNI code 11) while this file exists
//	"failAdd": message     ADD fails with this message
//	"sleepAdd": duration   ADD writes its pid to "pidFile" (if set), then sleeps
//	"stateDir": dir        ADD creates dir/<container>-<ifname>, DEL removes it
//
// Chained, it passes prevResult through; alone, it reports one interface.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

type conf struct {
	types.PluginConf
	FailDelWhile string `json:"failDelWhile"`
	FailAdd      string `json:"failAdd"`
	SleepAdd     string `json:"sleepAdd"`
	PIDFile      string `json:"pidFile"`
	StateDir     string `json:"stateDir"`
}

func load(a *skel.CmdArgs) (*conf, error) {
	c := &conf{}
	if err := json.Unmarshal(a.StdinData, c); err != nil {
		return nil, err
	}
	if err := version.ParsePrevResult(&c.PluginConf); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *conf) state(a *skel.CmdArgs) string {
	return filepath.Join(c.StateDir, a.ContainerID+"-"+a.IfName)
}

func add(a *skel.CmdArgs) error {
	c, err := load(a)
	if err != nil {
		return err
	}
	if c.PIDFile != "" {
		if err := os.WriteFile(c.PIDFile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return err
		}
	}
	if c.SleepAdd != "" {
		d, err := time.ParseDuration(c.SleepAdd)
		if err != nil {
			return err
		}
		time.Sleep(d)
	}
	if c.FailAdd != "" {
		return types.NewError(types.ErrInternal, c.FailAdd, "")
	}
	if c.StateDir != "" {
		if err := os.WriteFile(c.state(a), nil, 0o644); err != nil {
			return err
		}
	}
	if c.PrevResult != nil {
		return types.PrintResult(c.PrevResult, c.CNIVersion)
	}
	r := &current.Result{CNIVersion: current.ImplementedSpecVersion, Interfaces: []*current.Interface{{Name: a.IfName, Sandbox: a.Netns}}}
	return types.PrintResult(r, c.CNIVersion)
}

func del(a *skel.CmdArgs) error {
	c, err := load(a)
	if err != nil {
		return err
	}
	if c.FailDelWhile != "" {
		if _, err := os.Stat(c.FailDelWhile); err == nil {
			return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("testplugin: DEL of %s fails while %s exists", a.IfName, c.FailDelWhile), "")
		}
	}
	if c.StateDir != "" {
		if err := os.Remove(c.state(a)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    add,
		Del:    del,
		Check:  func(*skel.CmdArgs) error { return nil },
		Status: func(*skel.CmdArgs) error { return nil },
		GC:     func(*skel.CmdArgs) error { return nil },
	}, version.All, "rdmanet test plugin")
}
