package cli

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mm2go/mm2go/shared/config"
)

// writeAppUsage is `<function> -h`: the sub-commands, the exit codes they return and every
// setting the function reads.
func writeAppUsage(app App, stdout, stderr io.Writer) int {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n", usageLine(app))
	if app.About != "" {
		fmt.Fprintf(&b, "\n%s\n", app.About)
	}
	if len(app.Commands) > 0 {
		fmt.Fprintf(&b, "\nSub-commands (%s <sub-command> -h: its flags, exit codes and the settings it reads):\n", app.Name)
		width := 0
		for _, n := range commandNames(app) {
			width = max(width, len(n))
		}
		for _, n := range commandNames(app) {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, n, app.Commands[n].Summary)
		}
		var codes []string
		seen := map[int]bool{}
		for _, n := range commandNames(app) {
			for _, e := range app.Commands[n].Exits {
				if !seen[e.Code] {
					seen[e.Code] = true
					codes = append(codes, fmt.Sprint(e.Code))
				}
			}
		}
		if len(codes) > 0 {
			fmt.Fprintf(&b, "\nExit codes of the sub-commands: %s (each sub-command's -h says which it returns and when;\ndocs/summary-and-exit-codes.md).\n", strings.Join(codes, ", "))
		}
	}
	fmt.Fprintln(&b)
	if err := config.UsageOf(&b, app.Name); err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFailed
	}
	writeProcessUsage(&b)
	_, _ = stdout.Write(b.Bytes())
	return ExitOK
}

// writeCommandUsage is `<function> <sub-command> -h`: its usage line, what it does, its flags,
// its exit codes and the settings it reads.
func writeCommandUsage(app App, name string, c Command, stdout, stderr io.Writer) int {
	var b bytes.Buffer
	fmt.Fprintf(&b, "usage: %s %s\n", app.Name, synopsis(name, c))
	about := c.About
	if about == "" {
		about = c.Summary
	}
	if about != "" {
		fmt.Fprintf(&b, "\n%s\n", about)
	}
	fmt.Fprintf(&b, "\nFlags:\n")
	if c.Flags != nil {
		fs := flag.NewFlagSet(app.Name+" "+name, flag.ContinueOnError)
		c.Flags(fs)
		fs.SetOutput(&b)
		fs.PrintDefaults()
	}
	fmt.Fprintf(&b, "  -h, --help\n    \tthis text\n")
	if len(c.Exits) > 0 {
		fmt.Fprintf(&b, "\nExit codes:\n")
		for _, e := range c.Exits {
			fmt.Fprintf(&b, "  %d  %s\n", e.Code, e.Meaning)
		}
	}
	fmt.Fprintf(&b, "\nSettings %s %s reads:\n\n", app.Name, name)
	if err := config.UsageOfCommand(&b, app.Name, name); err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFailed
	}
	writeProcessUsage(&b)
	_, _ = stdout.Write(b.Bytes())
	return ExitOK
}

// usageLine is the function's usage line, naming every sub-command.
func usageLine(app App) string {
	return fmt.Sprintf("usage: %s %s [flags]   (%s -h: this text; %s help <sub-command>: its own)",
		app.Name, strings.Join(append(commandNames(app), "help"), "|"), app.Name, app.Name)
}

// synopsis is a sub-command's usage after the function's name.
func synopsis(name string, c Command) string {
	if c.Synopsis == "" {
		return name
	}
	return name + " " + c.Synopsis
}

// commandNames are app's sub-commands: run and serve first, then the others by name.
func commandNames(app App) []string {
	names := make([]string, 0, len(app.Commands))
	for n := range app.Commands {
		names = append(names, n)
	}
	rank := func(n string) int {
		switch n {
		case "run":
			return 0
		case "serve":
			return 1
		}
		return 2
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}
