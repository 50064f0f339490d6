package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU per event is steadier than throughput on a shared machine: the bench
// reads the CPU time the phase cost the PostgreSQL backends of its database
// (from /proc, when the server runs on this machine) and the Go process
// that did the work (this process for the library phases, tallyd for the
// HTTP phases).

const clockTick = 100 // USER_HZ on Linux

// procCPU is the user+system CPU time of pid so far; ok is false when
// /proc has no such process.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+st) * time.Second / clockTick, true
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuSnapshot is the CPU used so far by the bench database's backends and
// by the Go process of a phase.
type cpuSnapshot struct {
	backends map[int]time.Duration
	goCPU    time.Duration
}

// snapshot reads the CPU so far; self selects this process, else tallyd.
func (b *bench) snapshot(ctx context.Context, self bool) cpuSnapshot {
	s := cpuSnapshot{backends: map[int]time.Duration{}}
	if self {
		s.goCPU = selfCPU()
	} else if b.srv != nil && b.srv.cmd != nil && b.srv.cmd.Process != nil {
		s.goCPU, _ = procCPU(b.srv.cmd.Process.Pid)
	}
	if b.pg == nil {
		return s
	}
	rows, err := b.pg.admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1", b.pg.name)
	if err != nil {
		return s
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			if c, ok := procCPU(pid); ok {
				s.backends[pid] = c
			}
		}
	}
	return s
}

// cpuPer sets the phase's CPU per operation from two snapshots. A backend
// that ended during the phase is not counted; the pools of a phase keep
// their connections, so none does.
func cpuPer(p *phaseResult, from, to cpuSnapshot, n int) {
	if n == 0 {
		return
	}
	db, goCPU := cpuDiff(from, to)
	p.DBCPUMicros = float64(db.Microseconds()) / float64(n)
	p.GoCPUMicros = float64(goCPU.Microseconds()) / float64(n)
}

// cpuDiff is the CPU the bench database's backends and the Go process
// spent between two snapshots.
func cpuDiff(from, to cpuSnapshot) (db, goCPU time.Duration) {
	for pid, c := range to.backends {
		db += c - from.backends[pid]
	}
	return db, to.goCPU - from.goCPU
}
