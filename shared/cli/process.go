package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mm2go/mm2go/shared/config"
)

// ProcessSetting is an environment variable every function reads outside its flow settings
// (config.Config): profiles, the Go runtime's limits, OpenTelemetry export.
type ProcessSetting struct {
	Name, Desc, Default string
}

// ProcessSettings are listed by every function's -h after its flow settings.
var ProcessSettings = []ProcessSetting{
	{EnvCPUProfile, "file that receives a CPU profile of the whole run (go tool pprof)", ""},
	{EnvAllocProfile, "file that receives the allocation profile (every allocation since start) when the process ends", ""},
	{EnvTrace, "file that receives an execution trace of the whole run (go tool trace)", ""},
	{"GOMEMLIMIT", "Go's soft memory limit; set it (e.g. 256MiB) to give a burst more memory", "40MiB"},
	{"GOGC", "Go's garbage collector target, used with the default GOMEMLIMIT (a GOMEMLIMIT of your own keeps Go's 100)", "400"},
	{"GOMAXPROCS", "threads running Go code at once", "1 where Go's default is 2 or less, else Go's default"},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTLP collector the metrics are pushed to (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT for metrics only); unset: no OTLP export", ""},
	{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf or grpc (OTEL_EXPORTER_OTLP_METRICS_PROTOCOL for metrics only); the exporter reads the other standard OTEL_EXPORTER_OTLP_* variables (headers, certificates, timeout) and OTEL_METRIC_EXPORT_INTERVAL itself", "http/protobuf"},
}

// processNames are the MM2_* variables read outside config (ProcessSettings).
var processNames = map[string]bool{EnvCPUProfile: true, EnvAllocProfile: true, EnvTrace: true}

// writeProcessUsage writes ProcessSettings in the layout of config.UsageOf.
func writeProcessUsage(w io.Writer) {
	fmt.Fprintln(w, "\nProcess settings (environment only), read by every function:")
	for _, s := range ProcessSettings {
		fmt.Fprintf(w, "\n%s\n    %s\n", s.Name, s.Desc)
		if s.Default != "" {
			fmt.Fprintf(w, "    default: %s\n", s.Default)
		}
	}
}

// unreadNames returns the MM2_* variables of environ that no function reads, sorted: a
// misspelt name, or a setting written for the cluster side that has none
// (MM2_SOURCE_PRODUCER_MAX_REQUEST_SIZE), would otherwise be ignored without a word.
func unreadNames(environ []string) []string {
	known := map[string]bool{}
	for _, n := range config.EnvNames() {
		known[n] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "MM2_") && !known[name] && !processNames[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// suggestion names a setting close to an unread one: the same setting of the other cluster.
func suggestion(name string) string {
	known := map[string]bool{}
	for _, n := range config.EnvNames() {
		known[n] = true
	}
	for _, p := range [][2]string{{"MM2_SOURCE_", "MM2_TARGET_"}, {"MM2_TARGET_", "MM2_SOURCE_"}} {
		if rest, ok := strings.CutPrefix(name, p[0]); ok && known[p[1]+rest] {
			return p[1] + rest
		}
	}
	return ""
}
