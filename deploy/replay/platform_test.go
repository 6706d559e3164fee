package replay

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestPlatformStopGraceIsRealTime: a run stopped at its deadline gets SIGTERM, and the
// platform's grace period (30 s) before SIGKILL. What a process does after SIGTERM (finish its
// writes, store its positions, leave its burst group) runs at the machine's speed, not the
// compressed clock's, so the grace is not compressed: a run that needs a second to stop ends
// by itself (exit 0), as it would on the platform.
func TestPlatformStopGraceIsRealTime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A stand-in for the function that takes 1 s to stop after SIGTERM, then exits 0.
	script := "#!/bin/sh\ntrap 'sleep 1; exit 0' TERM\nwhile :; do sleep 0.05; done\n"
	if err := os.WriteFile(filepath.Join(dir, "mirror"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	w := &Workload{Name: "slow-stop", Function: "mirror", Deadline: 6 * time.Second} // 100 ms here
	p := &platform{t: t, bin: dir, env: map[string]map[string]string{w.Name: {}},
		live: map[string]map[*run]*exec.Cmd{}, pending: map[string]int{}}
	p.start(w)
	p.wg.Wait()
	if len(p.runs) != 1 {
		t.Fatalf("%d runs, want 1", len(p.runs))
	}
	r := p.runs[0]
	if r.killed != "deadline" || r.exit != 0 {
		t.Errorf("run stopped %q with exit %d after %v; want stopped at its deadline, exit 0 (it stopped by itself within the grace period)",
			r.killed, r.exit, r.end.Sub(r.start).Round(time.Millisecond))
	}
}
