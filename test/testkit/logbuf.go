package testkit

import (
	"bytes"
	"io"
	"sync"
	"testing"
)

// logTail is how much of a failed test's log FailureLog prints.
const logTail = 32 << 10

// FailureLog returns a writer for the logs of the code under test (a slog handler's output)
// that keeps them in memory and prints their last 32 KiB with t.Log if t fails. Unlike a
// writer calling t.Log, it may be written to after the test ends, by goroutines that outlive
// it.
func FailureLog(t testing.TB) io.Writer {
	b := &SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of the code under test (last %d KiB):\n%s", logTail>>10, b.tail(logTail))
		}
	})
	return b
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers (a log sink for a
// server's goroutines, a child process's output read while it runs).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string { return b.tail(-1) }

// tail returns the last n bytes written (all of them if n < 0).
func (b *SyncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.Bytes()
	if n >= 0 && len(s) > n {
		s = s[len(s)-n:]
	}
	return string(s)
}
