// Package direct is rdmanet-direct, the per-call meta CNI: each process
// wires the meta plugin (package meta) with its own API client or static
// source and kubelet's PodResources (package kube), runs one verb and exits.
// The rdmanet shim runs it when no daemon answers.
package direct

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/cni/meta/kube"
)

// Versions the meta plugin speaks.
var Versions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// NewLogger logs to logFile (all levels at logLevel) and, with logToStderr
// or no logFile, warnings and errors to stderr. Never to stdout: stdout
// carries the CNI result only.
func NewLogger(c *meta.NetConf) (*slog.Logger, io.Closer) {
	level := slog.LevelInfo
	switch strings.ToLower(c.LogLevel) {
	case "debug", "verbose":
		level = slog.LevelDebug
	case "warning", "warn":
		level = slog.LevelWarn
	case "error", "panic":
		level = slog.LevelError
	}
	var w io.Writer = os.Stderr
	var closer io.Closer = io.NopCloser(nil)
	if c.LogFile != "" {
		f, err := os.OpenFile(c.LogFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
		if err == nil {
			closer = f
			w = f
			if c.LogToStderr {
				w = io.MultiWriter(f, os.Stderr)
			}
		}
	} else if !c.LogToStderr && level < slog.LevelWarn {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With("plugin", "rdmanet", "pid", os.Getpid()), closer
}

// NewPlugin wires a meta.Plugin from its config for a per-call invocation.
func NewPlugin(c *meta.NetConf, cniPath string, log *slog.Logger) (*meta.Plugin, func(), error) {
	p := &meta.Plugin{Conf: c, Log: log, CNI: meta.NewCNI(c, cniPath, nil)}
	var claims kube.ClaimDeviceResolver
	switch c.Source.Type {
	case "static":
		p.Source = &meta.StaticSource{Dir: c.Source.Dir, StatusDir: c.Source.StatusDir}
	default:
		ks, err := kube.NewKubeSource(c.Kubeconfig, 0)
		if err != nil {
			return nil, nil, err
		}
		p.Source = ks
		claims = kube.NewSliceResolver(ks.Core, "") // the host fallback knows no node name: the pool's slices wherever they are
	}
	prc, err := kube.NewPodResourcesClient(c.PodResourcesSocket)
	if err != nil {
		return nil, nil, err
	}
	prc.Claims = claims
	p.Devices = prc
	return p, func() { _ = prc.Close() }, nil
}

// NewDelPlugin wires a meta.Plugin for DEL and GC: they work from the cache
// alone, so no API client or PodResources connection is made, and nothing
// about the API's or the config's state can fail them.
func NewDelPlugin(c *meta.NetConf, cniPath string, log *slog.Logger) *meta.Plugin {
	return &meta.Plugin{Conf: c, Log: log, CNI: meta.NewCNI(c, cniPath, nil)}
}

func argsOf(a *skel.CmdArgs) meta.Args {
	return meta.Args{ContainerID: a.ContainerID, Netns: a.Netns, IfName: a.IfName, Args: a.Args, Path: a.Path}
}

func withPlugin(a *skel.CmdArgs, fn func(p *meta.Plugin) error) error {
	c, err := meta.ParseConfig(a.StdinData)
	if err != nil {
		return types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	log, closer := NewLogger(c)
	defer closer.Close()
	logWarnings(log, c)
	p, cleanup, err := NewPlugin(c, a.Path, log)
	if err != nil {
		log.Error("setup failed", "err", err)
		return err
	}
	defer cleanup()
	err = fn(p)
	if err != nil {
		log.Error("failed", "container", a.ContainerID, "err", err)
		return meta.AsCNIError(err)
	}
	return nil
}

// withDelPlugin is withPlugin for DEL and GC (meta.ParseDelConfig, NewDelPlugin).
func withDelPlugin(a *skel.CmdArgs, fn func(p *meta.Plugin) error) error {
	c := meta.ParseDelConfig(a.StdinData)
	log, closer := NewLogger(c)
	defer closer.Close()
	logWarnings(log, c)
	if err := fn(NewDelPlugin(c, a.Path, log)); err != nil {
		log.Error("failed", "container", a.ContainerID, "err", err)
		return meta.AsCNIError(err)
	}
	return nil
}

// logWarnings logs the config's warnings (unknown keys, ...).
func logWarnings(log *slog.Logger, c *meta.NetConf) {
	for _, w := range c.Warnings {
		log.Warn(w)
	}
}

// Main is the CNI entry point of the rdmanet-direct binary.
func Main() {
	skel.PluginMainFuncs(Funcs(), Versions, fmt.Sprintf("rdmanet meta CNI (Multus-compatible), CNI %v", Versions.SupportedVersions()))
}

// Funcs are the per-call plugin's verbs: each call's CNI_ARGS are parsed
// once, by meta.ParseCall, where the call enters.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add: func(a *skel.CmdArgs) error {
			return withPlugin(a, func(p *meta.Plugin) error {
				c, err := meta.ParseCall("ADD", argsOf(a))
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(context.Background(), p.Conf.AddTimeoutDur)
				defer cancel()
				res, err := p.Add(ctx, c)
				if err != nil {
					return err
				}
				return res.Print()
			})
		},
		Del: func(a *skel.CmdArgs) error {
			return withDelPlugin(a, func(p *meta.Plugin) error {
				c, err := meta.ParseCall("DEL", argsOf(a))
				if err != nil {
					return err
				}
				return p.Del(context.Background(), c)
			})
		},
		GC: func(a *skel.CmdArgs) error {
			return withDelPlugin(a, func(p *meta.Plugin) error { return p.GC(context.Background()) })
		},
		Check: func(a *skel.CmdArgs) error {
			return withPlugin(a, func(p *meta.Plugin) error {
				c, err := meta.ParseCall("CHECK", argsOf(a))
				if err != nil {
					return err
				}
				return p.Check(context.Background(), c)
			})
		},
		Status: func(a *skel.CmdArgs) error {
			return withPlugin(a, func(p *meta.Plugin) error { return p.Status(context.Background()) })
		},
	}
}
