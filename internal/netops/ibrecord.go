package netops

import (
	"fmt"
	"net"
	"path/filepath"
)

var _ IBVF = (*Recorder)(nil)

// IBGUIDs are the GUIDs the recorder has set on one VF.
type IBGUIDs struct {
	Node string `json:"node,omitempty"`
	Port string `json:"port,omitempty"`
	// Rebinds counts the VF's driver rebinds.
	Rebinds int `json:"rebinds,omitempty"`
}

func (r *Recorder) setGUID(pf string, vf int, guid net.HardwareAddr, kind string) error {
	if err := checkGUID(guid); err != nil {
		return err
	}
	return r.update(func(s *recState) ([]string, error) {
		if s.IBVFs == nil {
			s.IBVFs = map[string]IBGUIDs{}
		}
		g := s.IBVFs[vfKey(pf, vf)]
		if kind == "node_guid" {
			g.Node = guid.String()
		} else {
			g.Port = guid.String()
		}
		s.IBVFs[vfKey(pf, vf)] = g
		return []string{fmt.Sprintf("ip link set %s vf %d %s %s", pf, vf, kind, guid)}, nil
	})
}

func (r *Recorder) SetVFNodeGUID(pf string, vf int, guid net.HardwareAddr) error {
	return r.setGUID(pf, vf, guid, "node_guid")
}

func (r *Recorder) SetVFPortGUID(pf string, vf int, guid net.HardwareAddr) error {
	return r.setGUID(pf, vf, guid, "port_guid")
}

// RebindVF records the two sysfs writes, with the sysfs root shown as /sys.
func (r *Recorder) RebindVF(_ string, bdf, driver string) error {
	return r.update(func(s *recState) ([]string, error) {
		if s.Rebinds == nil {
			s.Rebinds = map[string]int{}
		}
		s.Rebinds[bdf]++
		dir := filepath.Join("/sys/bus/pci/drivers", driver)
		return []string{fmt.Sprintf("echo %s > %s/unbind", bdf, dir), fmt.Sprintf("echo %s > %s/bind", bdf, dir)}, nil
	})
}

// VFGUIDs returns the GUIDs recorded for the VF (zero value when none set).
func (r *Recorder) VFGUIDs(pf string, vf int) (IBGUIDs, error) {
	var out IBGUIDs
	err := r.read(func(s *recState) error {
		out = s.IBVFs[vfKey(pf, vf)]
		return nil
	})
	return out, err
}

// Rebinds returns how often the VF bdf was rebound.
func (r *Recorder) Rebinds(bdf string) (int, error) {
	var n int
	err := r.read(func(s *recState) error { n = s.Rebinds[bdf]; return nil })
	return n, err
}
