package offsetsync

import (
	"sync"
	"testing"

	"github.com/mm2go/mm2go/shared/mm2"
)

// TestConcurrentUse exercises Writer and Store from several goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	w := NewWriter(10)
	s := NewStore()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); i < 500; i++ {
				w.Record("t", int32(g), i, i)
				s.Add(mm2.OffsetSync{Topic: "t", Partition: int32(g), UpstreamOffset: i, DownstreamOffset: i})
				if i%50 == 0 {
					w.PromoteDelayed()
					_ = w.TakePending()
					s.ReadToEnd()
				}
				_, _ = s.Translate("t", int32(g), i/2)
				_ = s.Slots("t", int32((g+1)%4))
			}
		}()
	}
	wg.Wait()
	for g := range 4 {
		if got, ok := s.Translate("t", int32(g), 499); !ok || got != 499 {
			t.Errorf("partition %d: Translate(499) = %d, %v", g, got, ok)
		}
	}
}
