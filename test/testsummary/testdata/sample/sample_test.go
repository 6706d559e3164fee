package sample

import (
	"fmt"
	"testing"
)

func TestPass(t *testing.T) { t.Log("not shown") }

func TestSkipKit(t *testing.T) { t.Log("before"); t.Skip("the kit is not here") }

func TestSkipKitToo(t *testing.T) { t.Skip("the kit is not here") }

func TestSub(t *testing.T) {
	t.Run("skipped", func(t *testing.T) { t.Skipf("no broker: %d", 1) })
	t.Run("failed", func(t *testing.T) { t.Error("wrong answer") })
}

// TestDump fails, then its cleanup logs a long service log, as the replay tests do.
func TestDump(t *testing.T) {
	t.Cleanup(func() {
		log := ""
		for i := range 200 {
			log += fmt.Sprintf("service.go:%d: a log line of the service\n", i)
		}
		t.Logf("service log:\n%s", log)
	})
	t.Log("produced 10 records")
	t.Fatal("records missing on the target: 3 of 10")
}
