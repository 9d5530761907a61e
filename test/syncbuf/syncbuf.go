// Package syncbuf is a bytes.Buffer that goroutines may write while a test
// reads it: the log of a server under test (slog handlers, klog) written
// from its goroutines and read by the test's assertions.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write and String.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
