package cli

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// Opt-in profiles of one process, for performance work (docs/performance.md):
// MM2_CPU_PROFILE names a file that receives a CPU profile of the whole run, MM2_ALLOC_PROFILE
// one that receives the allocation profile (every allocation since start, by bytes and count)
// when the process ends, MM2_TRACE one that receives an execution trace of the whole run
// (`go tool trace`, whose -pprof=sync|sched|net views show where goroutines wait). Unset,
// nothing is profiled.
const (
	EnvCPUProfile   = "MM2_CPU_PROFILE"
	EnvAllocProfile = "MM2_ALLOC_PROFILE"
	EnvTrace        = "MM2_TRACE"
)

// startProfiles starts the profiles the environment asks for and returns the function that
// writes them. Failures are reported on stderr and never stop the function.
func startProfiles(lookupEnv func(string) (string, bool), stderr io.Writer) (stop func()) {
	var stops []func()
	// streamed starts a recording that streams into the file its variable names until stop.
	streamed := func(env, what string, start func(io.Writer) error, stop func()) {
		path, ok := lookupEnv(env)
		if !ok || path == "" {
			return
		}
		f, err := os.Create(path)
		if err == nil {
			if err = start(f); err != nil {
				_ = f.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s not started: %v\n", env, what, err)
			return
		}
		stops = append(stops, func() {
			stop()
			_ = f.Close()
		})
	}
	streamed(EnvCPUProfile, "CPU profile", pprof.StartCPUProfile, pprof.StopCPUProfile)
	streamed(EnvTrace, "execution trace", trace.Start, trace.Stop)
	if path, ok := lookupEnv(EnvAllocProfile); ok && path != "" {
		stops = append(stops, func() {
			f, err := os.Create(path)
			if err == nil {
				runtime.GC() // the profile's figures are as of the last collection
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintf(stderr, "%s: allocation profile not written: %v\n", EnvAllocProfile, err)
			}
		})
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}
