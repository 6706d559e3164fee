package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// perfAttempt is one configuration of Kafka's producer perf test writing the workload's
// records into the target: procs processes in parallel, each with its share of the records.
type perfAttempt struct {
	Processes int      `json:"processes"`
	Props     []string `json:"producer_props"`
	// RecordsPS and MBPS: all records over the longest process's own send time (each
	// process's summary; the JVM's start is not in it).
	RecordsPS  float64 `json:"records_per_s"`
	MBPS       float64 `json:"mb_per_s"`
	CPUSeconds float64 `json:"cpu_s"`
	// CPUSecondsPerGB is the producers' CPU time (the JVMs' start included) per 1e9 bytes.
	CPUSecondsPerGB float64 `json:"cpu_s_per_gb"`
	PeakRSSKiB      int64   `json:"peak_rss_kib"`
}

// ceilingPerf runs the producer perf test with large batches into scratch topics on the
// target, once per configuration, and returns every attempt. The JVM is run directly, with
// the JIT fully on (kafka.sh's tool runner limits it to C1 for quick tools) and 1 GiB heap.
func (h *harness) ceilingPerf(ctx context.Context, w workload, procs []int) ([]perfAttempt, error) {
	type config struct {
		procs int
		batch int
	}
	var configs []config
	for _, p := range procs {
		configs = append(configs, config{p, 262144})
		if p == 1 {
			configs = append(configs, config{1, 1048576})
		}
	}
	recArgs, err := h.perfRecordArgs(w)
	if err != nil {
		return nil, err
	}
	var out []perfAttempt
	for i, cfg := range configs {
		topic := fmt.Sprintf("ceiling-%d-%s", i, strings.ToLower(w.Name))
		if _, err := h.tgtAdm.CreateTopics(ctx, w.Partitions, 1, nil, topic); err != nil {
			return out, err
		}
		if err := h.waitTopics(ctx, []string{topic}); err != nil {
			return out, err
		}
		props := []string{"acks=all", fmt.Sprintf("batch.size=%d", cfg.batch), "linger.ms=10", "buffer.memory=134217728"}
		if w.Compression != "" {
			props = append(props, "compression.type="+w.Compression)
		}
		a := perfAttempt{Processes: cfg.procs, Props: props}
		total := w.Records
		cmds := make([]*exec.Cmd, cfg.procs)
		outs := make([]*strings.Builder, cfg.procs)
		shares := make([]int, cfg.procs)
		for p := range cmds {
			shares[p] = total / cfg.procs
			if p == 0 {
				shares[p] += total % cfg.procs
			}
			args := append([]string{"-Xms1g", "-Xmx1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
				"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
				"-Djava.awt.headless=true",
				"-Dlog4j2.configurationFile=" + filepath.Join(h.home, "log4j2-tools.properties"),
				"-cp", h.lib + "/*", "org.apache.kafka.tools.ProducerPerformance",
				"--topic", topic, "--num-records", strconv.Itoa(shares[p]), "--throughput", "-1"}, recArgs...)
			args = append(args, "--producer-props", "bootstrap.servers="+h.target)
			args = append(args, props...)
			cmds[p] = exec.CommandContext(ctx, "java", args...)
			outs[p] = &strings.Builder{}
			cmds[p].Stdout, cmds[p].Stderr = outs[p], outs[p]
		}
		for _, c := range cmds {
			if err := c.Start(); err != nil {
				return out, err
			}
		}
		stop := make(chan struct{})
		hwm := make([]int64, len(cmds))
		go func() {
			for {
				for i, c := range cmds {
					hwm[i] = max(hwm[i], vmHWM(c.Process.Pid))
				}
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
		var runErr error
		for _, c := range cmds {
			if err := c.Wait(); err != nil && runErr == nil {
				runErr = err
			}
		}
		close(stop)
		var longest float64
		for p, c := range cmds {
			var ct contender
			rss := ct.rusage(c.ProcessState)
			a.CPUSeconds += ct.CPUSeconds
			a.PeakRSSKiB = max(a.PeakRSSKiB, rss, hwm[p])
			if runErr != nil {
				continue
			}
			rps, _, err := parseProducerPerf(outs[p].String())
			if err != nil {
				return out, err
			}
			longest = max(longest, float64(shares[p])/rps)
		}
		_, _ = h.tgtAdm.DeleteTopics(ctx, topic)
		if runErr != nil {
			return out, fmt.Errorf("producer perf test (%d processes, %s): %w\n%s", cfg.procs, strings.Join(props, " "), runErr, outs[0].String())
		}
		bytes := w.totalBytes()
		a.RecordsPS = float64(total) / longest
		a.MBPS = float64(bytes) / 1e6 / longest
		a.CPUSecondsPerGB = a.CPUSeconds / (float64(bytes) / 1e9)
		h.logger.Info("ceiling attempt", "processes", a.Processes, "props", strings.Join(props, " "), "records_per_s", int(a.RecordsPS))
		out = append(out, a)
	}
	return out, nil
}

// best returns the fastest attempt (zero if none).
func bestAttempt(as []perfAttempt) perfAttempt {
	var b perfAttempt
	for _, a := range as {
		if a.RecordsPS > b.RecordsPS {
			b = a
		}
	}
	return b
}
