package metrics

import (
	"context"
	"net"
	"sync"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
)

type grpcSink struct {
	colmetrics.UnimplementedMetricsServiceServer
	mu      sync.Mutex
	records int64
}

func (g *grpcSink) Export(_ context.Context, req *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if m.GetName() == NameRecordsCopied {
					for _, dp := range m.GetSum().GetDataPoints() {
						g.records = dp.GetAsInt()
					}
				}
			}
		}
	}
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

func TestOTLPGRPCShutdownFlushes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &grpcSink{}
	srv := grpc.NewServer()
	colmetrics.RegisterMetricsServiceServer(srv, sink)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + ln.Addr().String(),
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_INSECURE": "true",
		"OTEL_METRIC_EXPORT_INTERVAL": "3600000",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	r, err := New(ctx, Options{Function: "mirror", LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if r.OTLP() != "grpc" {
		t.Fatalf("OTLP() = %q", r.OTLP())
	}
	r.Copied(ctx, "t", 0, 7, 70)
	if err := r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.records != 7 {
		t.Fatalf("gRPC receiver got %d records copied, want 7", sink.records)
	}
}
