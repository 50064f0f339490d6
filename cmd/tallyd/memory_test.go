package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	memClients  = 64      // concurrent requests per wave
	memBodySize = 8 << 20 // each body, at the default cap
)

// memBatch is one POST /api/v1/events body of 1000 events padded to just
// under size bytes with a large payload.provider member each: the whole
// pipeline (split, decode, validate, store) runs on every byte. The same
// batch is sent every time, so the in-memory store keeps one copy and later
// waves are all duplicates.
func memBatch(size int) []byte {
	const n = 1000
	head := func(i int) string {
		return fmt.Sprintf(`{"event_id":"mem-%04d","timestamp":"2026-03-01T12:00:00Z","event_type":"widget.create.end",`+
			`"platform":"openstack","cloud":"os-dev","resource_type":"widget","resource_id":"w-%04d","project_id":"p",`+
			`"payload":{"state":"active","size":{"n":1},"provider":{"blob":"`, i, i)
	}
	const tail = `"}}}`
	per := (size-2)/n - 1 - len(head(0)) - len(tail)
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(head(i))
		b.WriteString(strings.Repeat("x", per))
		b.WriteString(tail)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// vmHWM reads the peak resident set size (VmHWM, in bytes) of process pid
// from /proc.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
	}
	kb, err := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10, err
}

// BenchmarkMemory64x8MiB: Memory per request: "Peak RSS under 64
// concurrent 8 MiB bodies ≤ 400 MiB, whenever the garbage collector
// happens to run". It starts tallyd --dev (in-memory store, default
// budget and cap) and sends b.N waves of 64 concurrent authenticated
// 8 MiB batches over loopback, and reports tallyd's peak RSS (VmHWM, the
// kernel's high-water mark, so no sample can miss the peak) and how the
// requests were answered (200, or 503 with Retry-After beyond the body
// budget). Run with:
//
//	go test -run='^$' -bench=Memory64x8MiB -benchtime=3x ./cmd/tallyd
func BenchmarkMemory64x8MiB(b *testing.B) {
	d := startCommand(b, exec.Command(tallydBinary(b), "--listen", "127.0.0.1:0", "--dev"))
	var token []string
	for deadline := time.Now().Add(time.Minute); token == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		token = regexp.MustCompile(`export TALLY_TOKEN=(\S+)`).FindStringSubmatch(d.stdout.String())
	}
	if token == nil {
		b.Fatalf("no token in tallyd's output:\n%s", d.stdout.String())
	}
	body := memBatch(memBodySize)
	if len(body) > memBodySize {
		b.Fatalf("body %d bytes, over %d", len(body), memBodySize)
	}
	base, err := vmHWM(d.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: memClients}, Timeout: 5 * time.Minute}
	var mu sync.Mutex
	codes := map[int]int{}
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		for range memClients {
			wg.Go(func() {
				req, _ := http.NewRequest("POST", d.base+"/api/v1/events", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token[1])
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				code := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	peak, err := vmHWM(d.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(base)/(1<<20), "start-RSS-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	for code, n := range codes {
		b.ReportMetric(float64(n), fmt.Sprintf("status-%d", code))
	}
	if codes[0] > 0 || codes[500] > 0 {
		b.Errorf("answers: %v (0: the request failed)", codes)
	}
}
