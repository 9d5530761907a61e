package verify

// The nccl layer: what the pod's NCCL log says about the transport (nccl-log).

import (
	"fmt"
	"io"
	"strings"

	"github.com/rdmanet/rdmanet/internal/nccl"
)

func (c *checker) ncclLog() {
	const L = LayerNCCL
	if !c.f.LogsWanted {
		c.add(L, IDNCCLLog, Skip, "--nccl-logs not given", "")
		return
	}
	if c.f.LogsErr != nil {
		c.add(L, IDNCCLLog, Unknown, fmt.Sprintf("logs of %s container %s: %v", c.podRef(), orDash(c.f.Container), c.f.LogsErr), "you need get on pods/log")
		return
	}
	rep, err := nccl.Parse([]string{"pod/" + c.pod.Name}, []io.Reader{strings.NewReader(c.f.Logs)})
	if err != nil {
		c.add(L, IDNCCLLog, Unknown, "NCCL log: "+err.Error(), "")
		return
	}
	gdr := rep.GDRVerdict
	if gdr == "" {
		gdr = "no"
		if rep.GDR {
			gdr = "yes"
		}
	}
	desc := fmt.Sprintf("transport %s, HCAs %s, OOB %s, GPUDirect RDMA %s", rep.Transport, orNone(rep.HCAs), orNone(rep.OOB), gdr)
	var errs, fixes []string
	for _, p := range rep.Problems {
		if p.Severity == "error" {
			errs = append(errs, p.Message)
			if p.Fix != "" {
				fixes = append(fixes, p.Fix)
			}
		}
	}
	switch {
	case len(errs) > 0:
		c.add(L, IDNCCLLog, Problem, desc+": "+strings.Join(errs, "; "), strings.Join(fixes, "; "))
	case rep.Transport == nccl.TransportIB || rep.Transport == nccl.TransportRoCE:
		c.add(L, IDNCCLLog, OK, "NCCL used NET/IB ("+rep.Transport+"): "+desc, "")
	case nccl.RDMA(rep.Transport):
		c.add(L, IDNCCLLog, OK, "NCCL used the RDMA network plugin "+rep.Transport+": "+desc, "")
	case rep.Transport != nccl.TransportUnknown:
		// Sockets on purpose (a baseline) or IB disabled or failed: the
		// log cannot tell an error here.
		msg, fix := "NCCL did not use RDMA: "+desc, ""
		for _, p := range rep.Problems {
			if p.Code != "NCCL_WARN" {
				msg, fix = msg+": "+p.Message, p.Fix
				break
			}
		}
		c.add(L, IDNCCLLog, Unknown, msg, fix)
	default:
		c.add(L, IDNCCLLog, Unknown, "no NET/ transport line in the log ("+desc+")", "run NCCL with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (and read the log before it rotates)")
	}
}
