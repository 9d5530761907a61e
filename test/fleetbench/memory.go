package fleetbench

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Memory is what the simulated nodes cost the benchmark's own process:
// the Go heap in use and the goroutines after the fleet published, less
// what the process held before the first node started, per node; and
// the process's resident set then.
type Memory struct {
	HeapPerNode       float64 // bytes of live heap (after a GC) per node
	GoroutinesPerNode float64
	RSS, HWM          int64 // the process's VmRSS and VmHWM after the fleet published
}

// memSample is the live heap (after a forced GC) and the goroutine count.
type memSample struct {
	heap       uint64
	goroutines int
}

func sampleMemory() memSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
}

// memoryPerNode derives Memory from samples before and after nodes started.
func memoryPerNode(before, after memSample, nodes int) Memory {
	var m Memory
	if nodes > 0 {
		m.HeapPerNode = (float64(after.heap) - float64(before.heap)) / float64(nodes)
		m.GoroutinesPerNode = float64(after.goroutines-before.goroutines) / float64(nodes)
	}
	m.RSS, m.HWM, _ = procMem(os.Getpid())
	return m
}

// writeHeapProfile writes the heap profile (pprof) to path after a GC.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	return f.Close()
}
