package pairprobe

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// dfControl returns a socket Control function that sets don't-fragment
// (IP_MTU_DISCOVER=IP_PMTUDISC_DO; for IPv6 IPV6_MTU_DISCOVER=DO and
// IPV6_DONTFRAG) and, when dev is set, binds the socket to that interface
// (SO_BINDTODEVICE; unprivileged on an unbound socket since Linux 5.7,
// best effort: *bound reports whether it took).
func dfControl(dev string, bound *bool) func(network, address string, c syscall.RawConn) error {
	return func(network, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			v6 := network == "udp6"
			if v6 {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
				if serr == nil {
					serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 1)
				}
			} else {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
			}
			if serr != nil {
				return
			}
			if dev != "" {
				if e := unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, dev); e == nil && bound != nil {
					*bound = true
				}
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// isMsgSize tells whether a send failed because the datagram is larger
// than the interface's MTU or the path MTU the kernel learnt (DF set).
func isMsgSize(err error) bool { return errors.Is(err, unix.EMSGSIZE) }

// isRefused tells whether an ICMP port unreachable came back: the peer is
// there, but nothing listens (responder not started yet, or gone).
func isRefused(err error) bool { return errors.Is(err, unix.ECONNREFUSED) }
