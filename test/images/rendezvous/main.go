// Command rdmanet-rendezvous does in miniature what NCCL's bootstrap and a
// first collective do between two ranks, so the cluster tier can prove that
// bytes crossed nodes on the training network. Test-only: it ships in the
// testbox image (localhost/testbox), never in rdmanet's.
//
//	rank 0: listens on MASTER_PORT (all addresses, so eth0), accepts rank 1,
//	        sends its --ifname address, receives rank 1's, then listens on its
//	        --ifname address for the data connection and serves it
//	rank 1: resolves MASTER_ADDR (the headless Service's name, through the
//	        cluster DNS) and connects over eth0, exchanges addresses, then
//	        connects to rank 0's --ifname address from its own --ifname
//	        address and runs a bulk transfer and a ping-pong
//
// Each rank prints one JSON object: the addresses on both sides, which local
// interface carried the data connection, the bytes moved, the bulk rate and
// the ping-pong round-trip percentiles. Exit 1 with a message naming the
// step that failed.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Result is what a rank prints.
type Result struct {
	Rank          int      `json:"rank"`
	MasterAddr    string   `json:"masterAddr,omitempty"`
	MasterIPs     []string `json:"masterIPs,omitempty"` // what MASTER_ADDR resolved to
	Ifname        string   `json:"ifname"`
	LocalAddr     string   `json:"localAddr"`  // this rank's --ifname address
	PeerAddr      string   `json:"peerAddr"`   // the other rank's, as it sent it
	DataLocal     string   `json:"dataLocal"`  // the data connection's local endpoint
	DataRemote    string   `json:"dataRemote"` // and its remote one
	DataIfname    string   `json:"dataIfname"` // the local interface holding DataLocal's address
	BulkBytes     int64    `json:"bulkBytes"`
	BulkMBps      float64  `json:"bulkMBps,omitempty"`
	PingPongs     int      `json:"pingPongs"`
	RTTP50Micros  float64  `json:"rttP50us,omitempty"`
	RTTP99Micros  float64  `json:"rttP99us,omitempty"`
	ElapsedMillis int64    `json:"elapsedMs"`
}

func main() {
	fs := flag.NewFlagSet("rdmanet-rendezvous", flag.ContinueOnError)
	rank := fs.Int("rank", envInt("JOB_COMPLETION_INDEX", 0), "this rank (default $JOB_COMPLETION_INDEX, what an Indexed Job sets)")
	ifname := fs.String("ifname", strings.TrimPrefix(os.Getenv("NCCL_SOCKET_IFNAME"), "="), "the training interface (default $NCCL_SOCKET_IFNAME without its '=')")
	master := fs.String("master-addr", os.Getenv("MASTER_ADDR"), "rank 0's name or address (default $MASTER_ADDR)")
	port := fs.Int("master-port", envInt("MASTER_PORT", 29400), "rank 0's rendezvous port (default $MASTER_PORT)")
	dataPort := fs.Int("data-port", 29401, "rank 0's data port on its training interface")
	bulk := fs.Int64("bulk-bytes", 64<<20, "bytes rank 1 sends rank 0 in the bulk transfer")
	pings := fs.Int("ping-pongs", 200, "round trips of a 64-byte message")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *ifname == "" {
		fail("flags", errors.New("--ifname (or NCCL_SOCKET_IFNAME) is empty: name the training interface, e.g. net1"))
	}
	r := Result{Rank: *rank, Ifname: *ifname}
	start := time.Now()
	deadline := start.Add(*timeout)
	addr, err := ifaceIPv4(*ifname)
	if err != nil {
		fail("training interface", err)
	}
	r.LocalAddr = addr
	switch *rank {
	case 0:
		err = serve(&r, *port, *dataPort, deadline)
	case 1:
		r.MasterAddr = *master
		err = connect(&r, *master, *port, *dataPort, *bulk, *pings, deadline)
	default:
		err = fmt.Errorf("rank %d: this program pairs ranks 0 and 1", *rank)
	}
	if err != nil {
		fail(fmt.Sprintf("rank %d", *rank), err)
	}
	r.ElapsedMillis = time.Since(start).Milliseconds()
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

func fail(step string, err error) {
	fmt.Fprintf(os.Stderr, "rdmanet-rendezvous: %s: %v\n", step, err)
	os.Exit(1)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// ifaceIPv4 is the first IPv4 address of the interface.
func ifaceIPv4(name string) (string, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("interface %s: %w", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", fmt.Errorf("interface %s addresses: %w", name, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("interface %s has no IPv4 address", name)
}

// ifaceOf names the local interface that holds ip.
func ifaceOf(ip net.IP) string {
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return ifc.Name
			}
		}
	}
	return ""
}

// serve is rank 0.
func serve(r *Result, port, dataPort int, deadline time.Time) error {
	lis, err := net.Listen("tcp4", fmt.Sprintf(":%d", port))
	if err != nil {
		return fmt.Errorf("listen on rendezvous port %d: %w", port, err)
	}
	defer lis.Close()
	_ = lis.(*net.TCPListener).SetDeadline(deadline)
	// The data listener is up before rank 1 learns the address.
	data, err := net.Listen("tcp4", net.JoinHostPort(r.LocalAddr, strconv.Itoa(dataPort)))
	if err != nil {
		return fmt.Errorf("listen on %s:%d (%s): %w", r.LocalAddr, dataPort, r.Ifname, err)
	}
	defer data.Close()
	_ = data.(*net.TCPListener).SetDeadline(deadline)
	c, err := lis.Accept()
	if err != nil {
		return fmt.Errorf("wait for rank 1 on port %d: %w", port, err)
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	if r.PeerAddr, err = exchange(c, r.LocalAddr); err != nil {
		return err
	}
	d, err := data.Accept()
	if err != nil {
		return fmt.Errorf("wait for rank 1's data connection on %s: %w", r.Ifname, err)
	}
	defer d.Close()
	_ = d.SetDeadline(deadline)
	describe(r, d)
	br := bufio.NewReader(d)
	var size int64
	if _, err := fmt.Fscanf(br, "bulk %d\n", &size); err != nil {
		return fmt.Errorf("bulk header: %w", err)
	}
	t0 := time.Now()
	n, err := io.CopyN(io.Discard, br, size)
	if err != nil {
		return fmt.Errorf("bulk transfer: got %d of %d bytes: %w", n, size, err)
	}
	r.BulkBytes = n
	r.BulkMBps = float64(n) / (1 << 20) / time.Since(t0).Seconds()
	if _, err := fmt.Fprintf(d, "ok %d\n", n); err != nil {
		return fmt.Errorf("bulk acknowledgement: %w", err)
	}
	msg := make([]byte, 64)
	for {
		if _, err := io.ReadFull(br, msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("ping-pong after %d: %w", r.PingPongs, err)
		}
		if _, err := d.Write(msg); err != nil {
			return fmt.Errorf("ping-pong reply %d: %w", r.PingPongs, err)
		}
		r.PingPongs++
	}
}

// connect is rank 1.
func connect(r *Result, master string, port, dataPort int, bulk int64, pings int, deadline time.Time) error {
	if master == "" {
		return errors.New("--master-addr (or MASTER_ADDR) is empty")
	}
	var c net.Conn
	var lastErr error
	// Rank 0 may not be listening yet, and its DNS record appears when
	// the endpoint controller has seen its pod: retry as torchrun does.
	for time.Now().Before(deadline) {
		ips, err := lookupIPv4(master)
		if err != nil {
			lastErr = fmt.Errorf("resolve MASTER_ADDR %s: %w", master, err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		r.MasterIPs = ips
		c, err = net.DialTimeout("tcp4", net.JoinHostPort(ips[0], strconv.Itoa(port)), 5*time.Second)
		if err == nil {
			break
		}
		lastErr = fmt.Errorf("connect to rank 0 at %s (%s) port %d: %w", master, ips[0], port, err)
		time.Sleep(500 * time.Millisecond)
	}
	if c == nil {
		return lastErr
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	peer, err := exchange(c, r.LocalAddr)
	if err != nil {
		return err
	}
	r.PeerAddr = peer
	dialer := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(r.LocalAddr)}}
	d, err := dialer.Dial("tcp4", net.JoinHostPort(peer, strconv.Itoa(dataPort)))
	if err != nil {
		return fmt.Errorf("data connection from %s (%s) to rank 0's %s:%d: %w", r.LocalAddr, r.Ifname, peer, dataPort, err)
	}
	defer d.Close()
	_ = d.SetDeadline(deadline)
	describe(r, d)
	if _, err := fmt.Fprintf(d, "bulk %d\n", bulk); err != nil {
		return fmt.Errorf("bulk header: %w", err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	t0 := time.Now()
	for left := bulk; left > 0; {
		n := min(left, int64(len(buf)))
		if _, err := d.Write(buf[:n]); err != nil {
			return fmt.Errorf("bulk transfer with %d bytes left: %w", left, err)
		}
		left -= n
	}
	br := bufio.NewReader(d)
	var got int64
	if _, err := fmt.Fscanf(br, "ok %d\n", &got); err != nil || got != bulk {
		return fmt.Errorf("bulk acknowledgement: rank 0 got %d of %d bytes (%v)", got, bulk, err)
	}
	r.BulkBytes = bulk
	r.BulkMBps = float64(bulk) / (1 << 20) / time.Since(t0).Seconds()
	msg := make([]byte, 64)
	rtts := make([]time.Duration, 0, pings)
	for i := 0; i < pings; i++ {
		t := time.Now()
		if _, err := d.Write(msg); err != nil {
			return fmt.Errorf("ping %d: %w", i, err)
		}
		if _, err := io.ReadFull(br, msg); err != nil {
			return fmt.Errorf("pong %d: %w", i, err)
		}
		rtts = append(rtts, time.Since(t))
	}
	r.PingPongs = pings
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	if len(rtts) > 0 {
		r.RTTP50Micros = float64(rtts[len(rtts)/2].Microseconds())
		r.RTTP99Micros = float64(rtts[len(rtts)*99/100].Microseconds())
	}
	return nil
}

// lookupIPv4 resolves name to its IPv4 addresses (the pod network here is
// IPv4; "localhost" may list ::1 first).
func lookupIPv4(name string) ([]string, error) {
	all, err := net.LookupHost(name)
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, a := range all {
		if ip := net.ParseIP(a); ip != nil && ip.To4() != nil {
			ips = append(ips, a)
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("%s has no IPv4 address (got %v)", name, all)
	}
	return ips, nil
}

// exchange sends this rank's training address and reads the peer's, one
// line each way (NCCL's bootstrap allgather of ranks' addresses, for two).
func exchange(c net.Conn, local string) (string, error) {
	if _, err := fmt.Fprintf(c, "%s\n", local); err != nil {
		return "", fmt.Errorf("send training address: %w", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("receive the peer's training address: %w", err)
	}
	peer := strings.TrimSpace(line)
	if net.ParseIP(peer) == nil {
		return "", fmt.Errorf("the peer sent %q, not an address", peer)
	}
	return peer, nil
}

func describe(r *Result, c net.Conn) {
	r.DataLocal, r.DataRemote = c.LocalAddr().String(), c.RemoteAddr().String()
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		r.DataIfname = ifaceOf(a.IP)
	}
}
