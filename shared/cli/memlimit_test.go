package cli

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	oldGC := debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetMemoryLimit(old)
		debug.SetGCPercent(oldGC)
	})

	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	if got := setMemoryLimit(env(map[string]string{"GOMEMLIMIT": "1GiB"})); got != -1 {
		t.Errorf("with GOMEMLIMIT set: setMemoryLimit = %d, want -1 (runtime's own)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != old {
		t.Errorf("with GOMEMLIMIT set: limit changed to %d, want %d", got, old)
	}
	if got := setMemoryLimit(env(nil)); got != DefaultMemoryLimit {
		t.Errorf("without GOMEMLIMIT: setMemoryLimit = %d, want %d", got, DefaultMemoryLimit)
	}
	if got := debug.SetMemoryLimit(-1); got != DefaultMemoryLimit {
		t.Errorf("without GOMEMLIMIT: runtime limit = %d, want %d", got, DefaultMemoryLimit)
	}
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("without GOMEMLIMIT and GOGC: GOGC = %d, want %d", got, DefaultGCPercent)
	}
	setMemoryLimit(env(map[string]string{"GOGC": "50"}))
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: GOGC changed to %d, want the runtime's (100 here)", got)
	}
}

func TestSetMaxProcs(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	runtime.GOMAXPROCS(2)
	if got := setMaxProcs(env(map[string]string{"GOMAXPROCS": "2"})); got != -1 || runtime.GOMAXPROCS(0) != 2 {
		t.Errorf("with GOMAXPROCS set: setMaxProcs = %d, GOMAXPROCS %d; want -1 and 2 (the runtime's)", got, runtime.GOMAXPROCS(0))
	}
	if got := setMaxProcs(env(nil)); got != DefaultMaxProcs || runtime.GOMAXPROCS(0) != DefaultMaxProcs {
		t.Errorf("without GOMAXPROCS, runtime default 2: setMaxProcs = %d, GOMAXPROCS %d; want %d", got, runtime.GOMAXPROCS(0), DefaultMaxProcs)
	}
	runtime.GOMAXPROCS(SmallMaxProcs + 2)
	if got := setMaxProcs(env(nil)); got != -1 || runtime.GOMAXPROCS(0) != SmallMaxProcs+2 {
		t.Errorf("without GOMAXPROCS, runtime default %d: setMaxProcs = %d, GOMAXPROCS %d; want -1 (the runtime's kept)", SmallMaxProcs+2, got, runtime.GOMAXPROCS(0))
	}
}
