package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pair is a PostgreSQL primary of its own and a streaming replica of it
// (made by pg_basebackup), both on loopback, for the tests of a read
// replica (docs/scale-out.md, Read replicas). Their URLs name the database
// postgres; nothing else uses the two servers.
type Pair struct {
	PrimaryURL, ReplicaURL string
	bin, dir               string
	asUser                 []string // runuser -u postgres -- when run as root
}

// Replica starts a [Pair] and stops it on cleanup. It needs the server
// binaries (initdb, pg_ctl, pg_basebackup: /usr/lib/postgresql/*/bin or
// PATH). As every PostgreSQL test, it is skipped without TEST_DATABASE_URL
// (and fails when CI is set); without the binaries it is skipped, or fails
// when CI is set.
func Replica(t testing.TB) *Pair {
	t.Helper()
	admin(t) // the PostgreSQL tests' gate
	bin := serverBinaries()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("pgtest: no PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup), and CI is set")
		}
		t.Skip("pgtest: no PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup); skipping the replica test")
	}
	dir, err := os.MkdirTemp("", "tally-replica-")
	if err != nil {
		t.Fatal(err)
	}
	p := &Pair{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		// The server refuses to run as root: run it as postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root needs the user postgres to start a server: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		p.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	t.Cleanup(func() {
		for _, d := range []string{"replica", "primary"} {
			_ = p.run("pg_ctl", "-D", filepath.Join(dir, d), "-m", "immediate", "-w", "stop")
		}
		_ = os.RemoveAll(dir)
	})
	primary, replica := freePort(t), freePort(t)
	pdata, rdata := filepath.Join(dir, "primary"), filepath.Join(dir, "replica")
	if err := p.run("initdb", "-D", pdata, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("pgtest: initdb: %v", err)
	}
	settings := "listen_addresses = '127.0.0.1'\nunix_socket_directories = '" + dir + "'\nfsync = off\nwal_level = replica\nmax_wal_senders = 4\n"
	if err := p.appendConf(pdata, settings+"port = "+strconv.Itoa(primary)+"\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.run("pg_ctl", "-D", pdata, "-l", filepath.Join(dir, "primary.log"), "-w", "start"); err != nil {
		t.Fatalf("pgtest: start the primary: %v", err)
	}
	if err := p.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary), "-U", "postgres", "-D", rdata, "-R", "-X", "stream", "--no-sync"); err != nil {
		t.Fatalf("pgtest: pg_basebackup: %v", err)
	}
	if err := p.appendConf(rdata, "port = "+strconv.Itoa(replica)+"\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.run("pg_ctl", "-D", rdata, "-l", filepath.Join(dir, "replica.log"), "-w", "start"); err != nil {
		t.Fatalf("pgtest: start the replica: %v", err)
	}
	url := func(port int) string {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	}
	p.PrimaryURL, p.ReplicaURL = url(primary), url(replica)
	return p
}

// PauseReplay stops the replica applying what it receives
// (pg_wal_replay_pause), until [Pair.ResumeReplay].
func (p *Pair) PauseReplay(t testing.TB) { p.exec(t, p.ReplicaURL, `SELECT pg_wal_replay_pause()`) }

// ResumeReplay resumes the replay and waits until the replica has
// replayed everything the primary had written when it was called.
func (p *Pair) ResumeReplay(t testing.TB) {
	t.Helper()
	p.exec(t, p.ReplicaURL, `SELECT pg_wal_replay_resume()`)
	p.WaitReplayed(t)
}

// WaitReplayed waits (up to 30 s) until the replica has replayed the
// primary's WAL as of the call.
func (p *Pair) WaitReplayed(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lsn string
	if err := queryRow(ctx, p.PrimaryURL, `SELECT pg_current_wal_lsn()::text`, &lsn); err != nil {
		t.Fatal(err)
	}
	for {
		var done bool
		err := queryRow(ctx, p.ReplicaURL, `SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn`, &done, lsn)
		if err == nil && done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pgtest: the replica did not replay %s within 30 s (%v)", lsn, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StopReplica stops the replica (fast shutdown).
func (p *Pair) StopReplica(t testing.TB) {
	t.Helper()
	if err := p.run("pg_ctl", "-D", filepath.Join(p.dir, "replica"), "-m", "fast", "-w", "stop"); err != nil {
		t.Fatal(err)
	}
}

func (p *Pair) exec(t testing.TB, url, sql string) {
	t.Helper()
	var ignored any
	if err := queryRow(context.Background(), url, sql, &ignored); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

func queryRow(ctx context.Context, url, sql string, dst any, args ...any) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	return c.QueryRow(ctx, sql, args...).Scan(dst)
}

// run runs one of the server's programs (as postgres when root) and
// returns its output with the error.
func (p *Pair) run(prog string, args ...string) error {
	return p.runPath(filepath.Join(p.bin, prog), args...)
}

func (p *Pair) runPath(prog string, args ...string) error {
	argv := append(append(append([]string{}, p.asUser...), prog), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", prog, err, out)
	}
	return nil
}

// appendConf appends to a data directory's postgresql.conf (written as
// the server's user, who owns it).
func (p *Pair) appendConf(data, text string) error {
	return p.runPath("/bin/sh", "-c", `printf '%s' "$1" >> "$2"/postgresql.conf`, "sh", text, data)
}

// serverBinaries finds the directory of initdb, pg_ctl and
// pg_basebackup: the newest /usr/lib/postgresql/*/bin (Debian's), else
// PATH's.
func serverBinaries() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_basebackup")); err == nil {
			return dirs[i]
		}
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(initdb)
	}
	return ""
}

// freePort is a loopback TCP port free when asked.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Promote promotes the replica (pg_promote, waiting up to 30 s): it leaves
// recovery and stops following the primary.
func (p *Pair) Promote(t testing.TB) { p.exec(t, p.ReplicaURL, `SELECT pg_promote(true, 30)`) }
