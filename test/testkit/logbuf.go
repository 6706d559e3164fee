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
	b := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of the code under test (last %d KiB):\n%s", logTail>>10, b.tail(logTail))
		}
	})
	return b
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.Bytes()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return string(s)
}
