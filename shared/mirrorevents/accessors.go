package mirrorevents

import "github.com/mm2go/mm2go/shared/metrics"

// SetMetrics makes the copier count bursts and payload writes with m (nil: none). Call it
// before the copier serves.
func (c *EngineCopier) SetMetrics(m *metrics.Recorder) { c.metrics = m }

// Mode is the handler's event mode, defaults applied.
func (h *Handler) Mode() Mode { return h.opts.Mode }
