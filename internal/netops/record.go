package netops

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// Recorder is the recording fake of VFConfigurator and RDMA. It keeps the VF
// and RDMA state in a JSON file guarded by a file lock, so every CNI plugin
// process of a test shares one simulated NIC, and appends each operation to
// <file>.log in `ip`/`rdma` command form.
//
// It models what the kernel does and nothing more: a VF it has not seen
// reports DefaultVFState; the RDMA subsystem starts in "shared" netns mode
// (the kernel default); an RDMA device it has not seen is in the host
// namespace; a device whose namespace has been deleted is back in the
// namespace it was first moved out of, as exclusive mode does.
type Recorder struct {
	path string
}

var (
	_ VFConfigurator = (*Recorder)(nil)
	_ RDMA           = (*Recorder)(nil)
)

// NewRecorder uses (and creates on first write) the state file path.
func NewRecorder(path string) *Recorder { return &Recorder{path: path} }

// StatePath is the recorder's state file.
func (r *Recorder) StatePath() string { return r.path }

// LogPath is the file the recorder appends commands to.
func (r *Recorder) LogPath() string { return r.path + ".log" }

type rdmaLoc struct {
	// Path and Ino identify the namespace the device is in; empty when home.
	Path string `json:"path,omitempty"`
	Ino  uint64 `json:"ino,omitempty"`
	// HomeIno is the namespace the device was first moved out of.
	HomeIno uint64 `json:"homeIno,omitempty"`
}

type recState struct {
	NetnsMode string             `json:"netnsMode"`
	VFs       map[string]VFState `json:"vfs"`
	RDMA      map[string]rdmaLoc `json:"rdma"`
	// IBVFs and Rebinds are InfiniBand VF GUIDs and driver rebinds (ibrecord.go).
	IBVFs   map[string]IBGUIDs `json:"ibVFs,omitempty"`
	Rebinds map[string]int     `json:"rebinds,omitempty"`
}

func vfKey(pf string, vf int) string { return fmt.Sprintf("%s/%d", pf, vf) }

// update runs f on the state under the lock and writes it back with the
// log lines f returns.
func (r *Recorder) update(f func(s *recState) ([]string, error)) error {
	lk, err := LockFile(r.path + ".lock")
	if err != nil {
		return err
	}
	defer lk.Unlock()
	s, err := r.load()
	if err != nil {
		return err
	}
	lines, err := f(s)
	if err != nil {
		return err
	}
	if lines == nil {
		return nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("netops recorder: %w", err)
	}
	if err := writeFileAtomic(r.path, b, 0o600, false); err != nil { // a fake needs no fsync
		return fmt.Errorf("netops recorder: %w", err)
	}
	return r.appendLog(lines)
}

// appendLog appends lines to the recorder's log (one file for every kind
// of operation recorded).
func (r *Recorder) appendLog(lines []string) error {
	lf, err := os.OpenFile(r.LogPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("netops recorder log: %w", err)
	}
	defer lf.Close()
	for _, l := range lines {
		if _, err := fmt.Fprintln(lf, l); err != nil {
			return fmt.Errorf("netops recorder log: %w", err)
		}
	}
	return nil
}

func (r *Recorder) load() (*recState, error) {
	s := &recState{NetnsMode: RDMANetnsShared, VFs: map[string]VFState{}, RDMA: map[string]rdmaLoc{}}
	b, err := os.ReadFile(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netops recorder: %w", err)
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("netops recorder: state file %s is corrupt: %w", r.path, err)
	}
	if s.VFs == nil {
		s.VFs = map[string]VFState{}
	}
	if s.RDMA == nil {
		s.RDMA = map[string]rdmaLoc{}
	}
	return s, nil
}

func (r *Recorder) read(f func(s *recState) error) error {
	lk, err := LockFile(r.path + ".lock")
	if err != nil {
		return err
	}
	defer lk.Unlock()
	s, err := r.load()
	if err != nil {
		return err
	}
	return f(s)
}

func (s *recState) vf(pf string, vf int) VFState {
	if st, ok := s.VFs[vfKey(pf, vf)]; ok {
		return st
	}
	return DefaultVFState()
}

func (r *Recorder) setVF(pf string, vf int, line string, f func(*VFState)) error {
	return r.update(func(s *recState) ([]string, error) {
		st := s.vf(pf, vf)
		f(&st)
		s.VFs[vfKey(pf, vf)] = st
		return []string{line}, nil
	})
}

// VFState returns the recorded state of the VF.
func (r *Recorder) VFState(pf string, vf int) (VFState, error) {
	var out VFState
	err := r.read(func(s *recState) error { out = s.vf(pf, vf); return nil })
	return out, err
}

func (r *Recorder) SetVFMAC(pf string, vf int, mac net.HardwareAddr) error {
	return r.setVF(pf, vf, fmt.Sprintf("ip link set %s vf %d mac %s", pf, vf, mac), func(s *VFState) { s.MAC = mac.String() })
}

func (r *Recorder) SetVFVlan(pf string, vf, vlan, qos int, proto string) error {
	if _, err := protoNumber(proto); err != nil {
		return err
	}
	if proto == "" {
		proto = Proto8021Q
	}
	line := fmt.Sprintf("ip link set %s vf %d vlan %d qos %d proto %s", pf, vf, vlan, qos, proto)
	return r.setVF(pf, vf, line, func(s *VFState) { s.Vlan, s.QoS, s.Proto = vlan, qos, proto })
}

func (r *Recorder) SetVFSpoofchk(pf string, vf int, on bool) error {
	return r.setVF(pf, vf, fmt.Sprintf("ip link set %s vf %d spoofchk %s", pf, vf, onOff(on)), func(s *VFState) { s.Spoofchk = on })
}

func (r *Recorder) SetVFTrust(pf string, vf int, on bool) error {
	return r.setVF(pf, vf, fmt.Sprintf("ip link set %s vf %d trust %s", pf, vf, onOff(on)), func(s *VFState) { s.Trust = on })
}

func (r *Recorder) SetVFLinkState(pf string, vf int, state string) error {
	if _, err := linkStateNumber(state); err != nil {
		return err
	}
	return r.setVF(pf, vf, fmt.Sprintf("ip link set %s vf %d state %s", pf, vf, state), func(s *VFState) { s.LinkState = state })
}

func (r *Recorder) SetVFRate(pf string, vf int, minMbps, maxMbps int) error {
	line := fmt.Sprintf("ip link set %s vf %d min_tx_rate %d max_tx_rate %d", pf, vf, minMbps, maxMbps)
	return r.setVF(pf, vf, line, func(s *VFState) { s.MinTxRate, s.MaxTxRate = minMbps, maxMbps })
}

// SetNetnsMode sets the simulated RDMA subsystem's netns mode (what
// `rdma system set netns <mode>` does at boot on a node).
func (r *Recorder) SetNetnsMode(mode string) error {
	if mode != RDMANetnsExclusive && mode != RDMANetnsShared {
		return fmt.Errorf("rdma system set netns %q: want exclusive or shared", mode)
	}
	return r.update(func(s *recState) ([]string, error) {
		s.NetnsMode = mode
		return []string{"rdma system set netns " + mode}, nil
	})
}

// NetnsMode returns the simulated netns mode.
func (r *Recorder) NetnsMode() (string, error) {
	var m string
	err := r.read(func(s *recState) error { m = s.NetnsMode; return nil })
	return m, err
}

// NetnsIno identifies a network namespace by its nsfs inode.
func NetnsIno(n ns.NetNS) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(n.Fd()), &st); err != nil {
		return 0, fmt.Errorf("stat netns %s: %w", n.Path(), err)
	}
	return st.Ino, nil
}

func pathIno(p string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return 0
	}
	return st.Ino
}

// where returns the inode of the namespace dev is in, 0 when home (or unseen).
func (s *recState) where(dev string) (loc rdmaLoc, home bool) {
	loc, ok := s.RDMA[dev]
	if !ok || loc.Ino == 0 {
		return loc, true
	}
	if pathIno(loc.Path) != loc.Ino { // namespace destroyed: the kernel returns the device home
		return loc, true
	}
	return loc, false
}

// visible reports whether dev is in the namespace ino. A device never moved
// is where the kernel created it, the node's host namespace: in shared mode
// every namespace sees it; in exclusive mode only the caller's own (cur:
// plugins run in the host namespace), never a pod's it has not been moved
// into.
func (s *recState) visible(dev string, ino, cur uint64) bool {
	loc, home := s.where(dev)
	if home {
		if loc.HomeIno == 0 {
			return s.NetnsMode != RDMANetnsExclusive || ino == cur
		}
		return loc.HomeIno == ino
	}
	return loc.Ino == ino
}

// currentNetnsIno is the inode of the calling thread's network namespace.
func currentNetnsIno() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("stat this thread's netns: %w", err)
	}
	return st.Ino, nil
}

// InNetns reports whether dev is in target.
func (r *Recorder) InNetns(dev string, target ns.NetNS) (bool, error) {
	ino, err := NetnsIno(target)
	if err != nil {
		return false, err
	}
	cur, err := currentNetnsIno()
	if err != nil {
		return false, err
	}
	var ok bool
	err = r.read(func(s *recState) error { ok = s.visible(dev, ino, cur); return nil })
	return ok, err
}

// Move moves dev from one namespace to another.
func (r *Recorder) Move(dev string, from, to ns.NetNS) error {
	fromIno, err := NetnsIno(from)
	if err != nil {
		return err
	}
	toIno, err := NetnsIno(to)
	if err != nil {
		return err
	}
	cur, err := currentNetnsIno()
	if err != nil {
		return err
	}
	return r.update(func(s *recState) ([]string, error) {
		if !s.visible(dev, fromIno, cur) {
			return nil, fmt.Errorf("rdma dev %s in netns %s: %w", dev, from.Path(), ErrRDMANotFound)
		}
		if s.NetnsMode != RDMANetnsExclusive {
			return nil, fmt.Errorf("rdma dev set %s netns %s: operation not supported (netns mode is %s)", dev, to.Path(), s.NetnsMode)
		}
		loc, home := s.where(dev)
		if home && loc.HomeIno == 0 {
			loc.HomeIno = fromIno
		}
		if toIno == loc.HomeIno {
			loc.Path, loc.Ino = "", 0
		} else {
			loc.Path, loc.Ino = to.Path(), toIno
		}
		s.RDMA[dev] = loc
		return []string{fmt.Sprintf("rdma dev set %s netns %s", dev, to.Path())}, nil
	})
}

// RDMAHome reports whether dev is in the namespace it started in.
func (r *Recorder) RDMAHome(dev string) (bool, error) {
	var home bool
	err := r.read(func(s *recState) error { _, home = s.where(dev); return nil })
	return home, err
}

// Log returns the commands recorded so far.
func (r *Recorder) Log() ([]string, error) {
	f, err := os.Open(r.LogPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netops recorder log: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}
