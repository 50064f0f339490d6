package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// phaseResult is one measured phase.
type phaseResult struct {
	Name string `json:"name"`
	// Unit is "events/s" or "creates/s".
	Unit    string  `json:"unit"`
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	// P50Ms and P99Ms are the latencies of one call (a batch, or a create),
	// in milliseconds.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// ServerPeakRSSMiB is tallyd's VmHWM after the phase (HTTP phases of a
	// server the bench started); ServerRSSEarlyMiB its VmRSS after a tenth
	// of the phase, ServerRSSEndMiB at its end.
	ServerPeakRSSMiB  float64 `json:"server_peak_rss_mib,omitempty"`
	ServerRSSEarlyMiB float64 `json:"server_rss_early_mib,omitempty"`
	ServerRSSEndMiB   float64 `json:"server_rss_end_mib,omitempty"`
	// DBCPUMicros is the CPU the bench database's backends spent per
	// operation (event or create); GoCPUMicros the Go process's (this one
	// for the library and SQL phases, tallyd for the HTTP ones). Zero when
	// the server is not on this machine.
	// DeliveryP50Ms and DeliveryP99Ms (the feed phase with subscribers)
	// are how long after a batch's answer its last event reached each
	// subscriber, in milliseconds.
	DeliveryP50Ms float64  `json:"delivery_p50_ms,omitempty"`
	DeliveryP99Ms float64  `json:"delivery_p99_ms,omitempty"`
	DBCPUMicros   float64  `json:"db_cpu_us_per_op"`
	GoCPUMicros   float64  `json:"go_cpu_us_per_op"`
	Checks        []string `json:"checks"`
	Problems      []string `json:"problems"`
}

// ratio is one ratio of two phases' rates in the same run.
type ratio struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
}

// report is the whole run, as printed and as --json writes it.
type report struct {
	// Store is "postgresql" or "in-memory".
	Store    string            `json:"store"`
	Short    bool              `json:"short"`
	Machine  machine           `json:"machine"`
	Workload map[string]any    `json:"workload"`
	Phases   []*phaseResult    `json:"phases"`
	Ratios   []ratio           `json:"ratios"`
	OK       bool              `json:"ok"`
	Errors   []string          `json:"errors,omitempty"`
	Settings map[string]string `json:"-"`
}

type machine struct {
	Cores      int               `json:"cores"`
	CPU        string            `json:"cpu"`
	LoadAvg    string            `json:"loadavg"`
	GoVersion  string            `json:"go"`
	PostgreSQL map[string]string `json:"postgresql,omitempty"`
}

func readMachine() machine {
	m := machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

// percentiles returns p50 and p99 of d in milliseconds.
func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s)-1) + 0.5)
		return float64(s[i]) / float64(time.Millisecond)
	}
	return at(0.50), at(0.99)
}

func (r *report) ok() bool {
	if len(r.Errors) > 0 {
		return false
	}
	for _, p := range r.Phases {
		if len(p.Problems) > 0 {
			return false
		}
	}
	return true
}

func thousands(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// print writes the human-readable report.
func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "tally-bench: store %s", r.Store)
	if r.Short {
		fmt.Fprint(w, " (--short: a smoke test of the checks; its rates mean nothing)")
	}
	fmt.Fprintln(w)
	m := r.Machine
	fmt.Fprintf(w, "machine: %d cores (%s), load %s, %s\n", m.Cores, m.CPU, m.LoadAvg, m.GoVersion)
	if pg := m.PostgreSQL; pg != nil {
		keys := make([]string, 0, len(pg))
		for k := range pg {
			if k != "server_version" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		parts := []string{"PostgreSQL " + pg["server_version"]}
		for _, k := range keys {
			parts = append(parts, k+"="+pg[k])
		}
		fmt.Fprintf(w, "postgresql: %s\n", strings.Join(parts, ", "))
	}
	keys := make([]string, 0, len(r.Workload))
	for k := range r.Workload {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var wl []string
	for _, k := range keys {
		wl = append(wl, fmt.Sprintf("%s=%v", k, r.Workload[k]))
	}
	fmt.Fprintf(w, "workload: %s\n\n", strings.Join(wl, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tcount\tseconds\trate\tp50 ms\tp99 ms\tCPU µs/op db+go\tserver RSS MiB (peak; early→end)\tchecks")
	for _, p := range r.Phases {
		rss := "-"
		if p.ServerPeakRSSMiB > 0 {
			rss = fmt.Sprintf("%.0f; %.0f→%.0f", p.ServerPeakRSSMiB, p.ServerRSSEarlyMiB, p.ServerRSSEndMiB)
		}
		checks := "ok"
		if len(p.Problems) > 0 {
			checks = fmt.Sprintf("FAILED (%d)", len(p.Problems))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s %s\t%.1f\t%.1f\t%.0f+%.0f\t%s\t%s\n", p.Name, p.Count, p.Seconds, thousands(p.Rate), p.Unit, p.P50Ms, p.P99Ms, p.DBCPUMicros, p.GoCPUMicros, rss, checks)
	}
	tw.Flush()
	if len(r.Ratios) > 0 {
		fmt.Fprintln(w, "\nratios (same run):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, q := range r.Ratios {
			fmt.Fprintf(tw, "  %s\t%.2f\t%s\n", q.Name, q.Value, q.Target)
		}
		tw.Flush()
	}
	for _, p := range r.Phases {
		for _, c := range p.Checks {
			fmt.Fprintf(w, "check %s: %s: ok\n", p.Name, c)
		}
		for _, pr := range p.Problems {
			fmt.Fprintf(w, "check %s: FAILED: %s\n", p.Name, pr)
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	if r.ok() {
		fmt.Fprintln(w, "\nall checks passed")
	} else {
		fmt.Fprintln(w, "\nCHECKS FAILED")
	}
}

// progress prints one line on stderr: the phase, how far it is, its rate.
type progress struct {
	mu    sync.Mutex
	name  string
	total int64
	start time.Time
	done  atomic.Int64
	tty   bool
	quiet bool
}

func newProgress(quiet bool) *progress {
	p := &progress{quiet: quiet}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		p.tty = true
	}
	return p
}

func (p *progress) begin(name string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name, p.total, p.start = name, int64(total), time.Now()
	p.done.Store(0)
}

func (p *progress) add(n int) { p.done.Add(int64(n)) }

// end stops reporting the phase.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name = ""
}

func (p *progress) line() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.name == "" {
		return ""
	}
	d := p.done.Load()
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(d) / el
	}
	return fmt.Sprintf("%-34s %8d/%-8d %8.0f/s %5.0fs", p.name, d, p.total, rate, el)
}

// run prints the line every second (in place on a terminal, one line every
// 5 seconds otherwise) until stop is closed.
func (p *progress) run(stop <-chan struct{}) {
	if p.quiet {
		return
	}
	every := 5 * time.Second
	if p.tty {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			if p.tty {
				fmt.Fprint(os.Stderr, "\r\033[K")
			}
			return
		case <-t.C:
			if l := p.line(); l != "" {
				if p.tty {
					fmt.Fprint(os.Stderr, "\r\033[K"+l)
				} else {
					fmt.Fprintln(os.Stderr, l)
				}
			}
		}
	}
}

// note prints a line of progress that stays.
func (p *progress) note(format string, args ...any) {
	if p.quiet {
		return
	}
	if p.tty {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
