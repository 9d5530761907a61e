package pairprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"
)

// Usage is `rdmanet-probe --help`.
const Usage = `rdmanet-probe: the in-pod probe of 'kubectl rdma verify' (pair layer).

  rdmanet-probe serve  '<ServeConfig JSON>'
      UDP echo responder on the pod's training addresses, don't-fragment set;
      exits after "expect" peers said goodbye or after max_wait_ms.
      {"self":"pod-a","listen":["10.60.1.5"],"port":47471,"expect":15,"max_wait_ms":120000}

  rdmanet-probe client '<ClientConfig JSON>'
      per target: reachable (small echo, retried for startup_ms), RTT (median
      of pings), largest DF payload echoed against MTU - IP/UDP headers.
      {"self":"pod-a","port":47471,"targets":[{"peer":"pod-b","network":"ns/nad",
        "interface":"net1","src":"10.60.1.5","dst":"10.60.2.7","mtu":9000}]}

Output: one JSON line per event on stdout, prefixed "@@rdma-probe ":
{"kind":"ready"|"result"|"error"|"done", ...}. The CLI starts it as an
ephemeral container and reads it back from the container's log; it is not
meant to be run by hand, though it can be (in any network namespace).

Exit status: 0 ran (results say what passed), 2 bad arguments or the
responder could not bind.
`

// Main is rdmanet-probe's entry point (cmd/rdmanet-probe only wires it).
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, Usage)
		return 0
	}
	if len(args) != 2 {
		fmt.Fprintf(stderr, "rdmanet-probe: want 'serve JSON' or 'client JSON', got %d arguments\n\n%s", len(args), Usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	out := &Output{W: stdout}
	switch args[0] {
	case "serve":
		var c ServeConfig
		if err := json.Unmarshal([]byte(args[1]), &c); err != nil {
			fmt.Fprintf(stderr, "rdmanet-probe serve: config %q: %v\n", args[1], err)
			return 2
		}
		if err := Serve(ctx, c, out); err != nil {
			fmt.Fprintf(stderr, "rdmanet-probe serve: %v\n", err)
			return 2
		}
	case "client":
		var c ClientConfig
		if err := json.Unmarshal([]byte(args[1]), &c); err != nil {
			fmt.Fprintf(stderr, "rdmanet-probe client: config %q: %v\n", args[1], err)
			return 2
		}
		if err := Client(ctx, c, out); err != nil {
			fmt.Fprintf(stderr, "rdmanet-probe client: %v\n", err)
			return 2
		}
	default:
		fmt.Fprintf(stderr, "rdmanet-probe: unknown subcommand %q: want serve or client\n", args[0])
		return 2
	}
	return 0
}
