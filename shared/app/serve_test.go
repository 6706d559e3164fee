package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/config"
)

// TestPayloadModeNeedsSenderAuth: `mirror serve` in payload mode refuses to start, before it
// connects to any cluster, unless sender authentication is on with a subject list.
func TestPayloadModeNeedsSenderAuth(t *testing.T) {
	env := func(c *config.Config) cli.Env {
		return cli.Env{Config: c, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LookupEnv: func(string) (string, bool) { return "", false }}
	}
	err := MirrorServe(context.Background(), env(&config.Config{EventMode: "payload", EventKeyType: "string"}))
	var ce *cli.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "MM2_EVENT_MODE=payload writes each event's body to the target cluster as a record") ||
		!strings.Contains(err.Error(), "MM2_SERVE_OIDC_ISSUER") || !strings.Contains(err.Error(), "MM2_SERVE_OIDC_ALLOWED_SUBJECTS") {
		t.Fatalf("payload mode without sender auth: %v, want a ConfigError naming the settings", err)
	}
	// Sender authentication without a subject list accepts every workload of the issuer.
	err = MirrorServe(context.Background(), env(&config.Config{EventMode: "payload", EventKeyType: "string",
		ServeOIDCIssuer: "https://issuer.example", ServeOIDCAudience: "mm2go"}))
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "MM2_SERVE_OIDC_ALLOWED_SUBJECTS") {
		t.Fatalf("payload mode with an empty subject list: %v, want a ConfigError naming MM2_SERVE_OIDC_ALLOWED_SUBJECTS", err)
	}
	// Half-configured sender authentication is a configuration error too.
	err = MirrorServe(context.Background(), env(&config.Config{EventMode: "payload", EventKeyType: "string", ServeOIDCIssuer: "https://issuer.example"}))
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "MM2_SERVE_OIDC_AUDIENCE is required with MM2_SERVE_OIDC_ISSUER") {
		t.Fatalf("issuer without audience: %v, want a ConfigError naming MM2_SERVE_OIDC_AUDIENCE", err)
	}
}
