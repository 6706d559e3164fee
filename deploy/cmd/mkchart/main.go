// Command mkchart packages the Helm chart as `helm package` does, with Helm v4's own package
// action: a <name>-<version>.tgz that `helm push <file> oci://<registry>/<path>` takes. It
// lints the chart first (`helm lint --strict`) and refuses to package on a warning or error.
// File times come from -created or SOURCE_DATE_EPOCH, so one commit gives one archive.
//
//	cd deploy && go run ./cmd/mkchart -chart helm/mm2go -o ../dist
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkchart:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkchart", flag.ContinueOnError)
	dir := fs.String("chart", "helm/mm2go", "chart directory")
	out := fs.String("o", "dist", "directory to write the .tgz to")
	created := fs.String("created", "", "file times, Unix seconds (default: $SOURCE_DATE_EPOCH, else the time of packaging)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	l := action.NewLint()
	l.Strict = true
	res := l.Run([]string{*dir}, nil)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			return fmt.Errorf("helm lint %s: %s", *dir, m)
		}
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("helm lint %s: %w", *dir, res.Errors[0])
	}
	p := action.NewPackage()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	p.Destination = *out
	if *created == "" {
		*created = os.Getenv("SOURCE_DATE_EPOCH")
	}
	if *created != "" {
		n, err := strconv.ParseInt(*created, 10, 64)
		if err != nil {
			return fmt.Errorf("-created %q: want Unix seconds", *created)
		}
		t := time.Unix(n, 0).UTC()
		p.SourceDateEpoch = &t
	}
	file, err := p.Run(*dir, nil)
	if err != nil {
		return fmt.Errorf("packaging %s: %w", *dir, err)
	}
	fmt.Println("wrote", file)
	return nil
}
