package replay

import (
	"time"

	"github.com/robfig/cron/v3"
)

// cronInterval is the time between two ticks of a standard cron schedule.
func cronInterval(schedule string) (time.Duration, error) {
	s, err := cron.ParseStandard(schedule)
	if err != nil {
		return 0, err
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return s.Next(s.Next(t0)).Sub(s.Next(t0)), nil
}
