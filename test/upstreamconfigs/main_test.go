package upstreamconfigs

import (
	"io"
	"log"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// rdma-shared-dev-plugin logs every config it reads through the log
	// package; the test's own output is what matters
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}
