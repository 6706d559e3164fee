package check

import (
	"bytes"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/mm2go/mm2go/deploy/internal/image"
)

// TestDockerfile parses the top-level Dockerfile with BuildKit's own parser and linter and
// checks that its final stage matches the image mkimage builds.
func TestDockerfile(t *testing.T) {
	src := mustRead(t, "Dockerfile")
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("parser warning: %s", w.Short)
	}
	var lint []string
	stages, _, err := instructions.Parse(res.AST, linter.New(&linter.Config{
		Warn: func(rule, short, url, fullMsg string, loc []parser.Range) {
			lint = append(lint, fmt.Sprintf("%s: %s", rule, short))
		},
	}))
	if err != nil {
		t.Fatalf("instructions: %v", err)
	}
	for _, l := range lint {
		t.Errorf("BuildKit lint: %s", l)
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a builder and a final stage", len(stages))
	}

	// Builder: static, trimmed binaries of all functions.
	var built bool
	for _, st := range stages[:len(stages)-1] {
		for _, c := range st.Commands {
			if r, ok := c.(*instructions.RunCommand); ok {
				line := strings.Join(r.CmdLine, " ")
				if strings.Contains(line, "go build") {
					built = true
					for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w"`, "./functions/..."} {
						if !strings.Contains(line, want) {
							t.Errorf("go build line lacks %s: %s", want, line)
						}
					}
				}
			}
		}
	}
	if !built {
		t.Error("no `go build` in a builder stage")
	}

	final := stages[len(stages)-1]
	if final.BaseName != "scratch" && !strings.Contains(final.BaseName, "distroless/static") {
		t.Errorf("final stage FROM %s, want scratch or distroless static (no shell)", final.BaseName)
	}
	var user string
	var entry []string
	dests := map[string]bool{}
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.RunCommand:
			if c.PrependShell {
				t.Errorf("final stage has a shell-form RUN (there is no shell): %s", strings.Join(c.CmdLine, " "))
			} else {
				t.Errorf("final stage runs a command; it should only copy: %v", c.CmdLine)
			}
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			if c.PrependShell {
				t.Error("ENTRYPOINT must be in exec (JSON) form")
			}
			entry = c.CmdLine
		case *instructions.CmdCommand:
			if c.PrependShell {
				t.Error("CMD must be in exec (JSON) form")
			}
		case *instructions.CopyCommand:
			for _, s := range c.SourcePaths {
				dst := c.DestPath
				if strings.HasSuffix(dst, "/") {
					dst = path.Join(dst, path.Base(s))
				}
				dests[dst] = true
			}
		}
	}
	if user != image.User && user != fmt.Sprint(image.UID) {
		t.Errorf("final USER %q, want %s (non-root)", user, image.User)
	}
	for _, fn := range image.Functions {
		if !dests[image.BinDir+"/"+fn] {
			t.Errorf("final stage does not copy %s/%s (copies %v)", image.BinDir, fn, keys(dests))
		}
	}
	if !dests[image.CACertsPath] {
		t.Errorf("final stage does not copy the CA certificates to %s", image.CACertsPath)
	}
	if len(entry) != 1 || entry[0] != image.BinDir+"/"+image.DefaultEntry {
		t.Errorf("ENTRYPOINT %q, want [%s/%s]", entry, image.BinDir, image.DefaultEntry)
	}
}

// TestDockerignore: the build context keeps what `go build ./functions/...` needs and leaves
// out the rest, matched the way BuildKit matches .dockerignore.
func TestDockerignore(t *testing.T) {
	patterns, err := ignorefile.ReadAll(bytes.NewReader(mustRead(t, ".dockerignore")))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	root := repoRoot(t)
	for _, keep := range []string{"go.mod", "go.sum", "functions/mirror", "shared/config/config.go", "Dockerfile"} {
		if excluded, _ := pm.MatchesOrParentMatches(keep); excluded {
			t.Errorf(".dockerignore excludes %s, which the build needs", keep)
		}
	}
	// Every package the functions import must be in the context.
	out, err := exec.Command("go", "list", "-C", root, "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "./functions/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a module dependency, downloaded in the build
		}
		if excluded, _ := pm.MatchesOrParentMatches(filepath.ToSlash(rel) + "/x.go"); excluded {
			t.Errorf(".dockerignore excludes %s, which the functions import", rel)
		}
	}
	for _, drop := range []string{".git/HEAD", "dist/mm2go-image.tar", "deploy/go.mod", "test/kafka/kafka.sh"} {
		if excluded, _ := pm.MatchesOrParentMatches(drop); !excluded {
			t.Errorf(".dockerignore lets %s into the build context", drop)
		}
	}
}
