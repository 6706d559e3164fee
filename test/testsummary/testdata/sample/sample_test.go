package sample

import "testing"

func TestPass(t *testing.T) { t.Log("not shown") }

func TestSkipKit(t *testing.T) { t.Log("before"); t.Skip("the kit is not here") }

func TestSkipKitToo(t *testing.T) { t.Skip("the kit is not here") }

func TestSub(t *testing.T) {
	t.Run("skipped", func(t *testing.T) { t.Skipf("no broker: %d", 1) })
	t.Run("failed", func(t *testing.T) { t.Error("wrong answer") })
}
