package cli

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
)

// Opt-in profiles of one process, for performance work (docs/performance.md):
// MM2_CPU_PROFILE names a file that receives a CPU profile of the whole run, MM2_ALLOC_PROFILE
// one that receives the allocation profile (every allocation since start, by bytes and count)
// when the process ends. Unset, nothing is profiled.
const (
	EnvCPUProfile   = "MM2_CPU_PROFILE"
	EnvAllocProfile = "MM2_ALLOC_PROFILE"
)

// startProfiles starts the profiles the environment asks for and returns the function that
// writes them. Failures are reported on stderr and never stop the function.
func startProfiles(lookupEnv func(string) (string, bool), stderr io.Writer) (stop func()) {
	var stops []func()
	if path, ok := lookupEnv(EnvCPUProfile); ok && path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: CPU profile not started: %v\n", EnvCPUProfile, err)
		} else {
			stops = append(stops, func() {
				pprof.StopCPUProfile()
				_ = f.Close()
			})
		}
	}
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
