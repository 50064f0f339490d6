package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// unitFile reads a systemd unit's [Service] section: each key's values in
// order (a key may repeat, as SystemCallFilter does).
func unitFile(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not key=value: %q", path, line)
			}
			out[k] = append(out[k], v)
		}
	}
	return out
}

// envFile reads KEY=value lines, skipping comments.
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not KEY=value: %q", path, line)
		}
		out[k] = v
	}
	return out
}

// Issue "Operating tallyd", point 3: "a systemd unit with hardening
// options, in the repository and documented". The unit sets each hardening
// key, runs as an unprivileged user, reloads with SIGHUP, stops with
// SIGTERM, and gives the stop more time than tallyd's drain and shutdown
// take with the example environment file (and with tallyd's defaults);
// every variable of that file is one of tallyd's.
func TestSystemdUnit(t *testing.T) {
	root := repoRoot(t)
	unit := unitFile(t, filepath.Join(root, "deploy", "systemd", "tallyd.service"))
	for key, want := range map[string]string{
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"MemoryDenyWriteExecute":  "yes",
		"LockPersonality":         "yes",
		"RestrictNamespaces":      "yes",
		"RestrictSUIDSGID":        "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectControlGroups":    "yes",
		"CapabilityBoundingSet":   "",
		"AmbientCapabilities":     "",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"SystemCallArchitectures": "native",
		"Restart":                 "on-failure",
		"KillSignal":              "SIGTERM",
		"ExecReload":              "/bin/kill -HUP $MAINPID",
	} {
		if got := unit[key]; len(got) != 1 || got[0] != want {
			t.Errorf("[Service] %s = %q, want %q", key, got, want)
		}
	}
	if !slices.Contains(unit["SystemCallFilter"], "@system-service") {
		t.Errorf("[Service] SystemCallFilter %q, want @system-service", unit["SystemCallFilter"])
	}
	if user := unit["User"]; unit["DynamicUser"] == nil && (len(user) != 1 || user[0] == "" || user[0] == "root") {
		t.Errorf("[Service] User %q and no DynamicUser: want an unprivileged user", user)
	}
	exec := strings.Fields(strings.Join(unit["ExecStart"], " "))
	if len(exec) < 2 || filepath.Base(exec[0]) != "tallyd" || exec[1] != "serve" {
		t.Errorf("[Service] ExecStart %q, want tallyd serve", unit["ExecStart"])
	}

	env := envFile(t, filepath.Join(root, "deploy", "systemd", "tallyd.env.example"))
	if got := unit["EnvironmentFile"]; len(got) != 1 || filepath.Base(got[0]) != "tallyd.env" {
		t.Errorf("[Service] EnvironmentFile %q, want /etc/tallyd/tallyd.env (from tallyd.env.example)", got)
	}
	known := map[string]bool{}
	for _, fe := range flagEnv {
		known[fe.env] = true
	}
	for k := range env {
		if !known[k] {
			t.Errorf("tallyd.env.example sets %s, which is no tallyd variable", k)
		}
	}
	stop, err := time.ParseDuration(strings.Join(unit["TimeoutStopSec"], ""))
	if err != nil {
		t.Fatalf("[Service] TimeoutStopSec %q: %v", unit["TimeoutStopSec"], err)
	}
	for name, getenv := range map[string]func(string) string{
		"tallyd's defaults":  func(string) string { return "" },
		"tallyd.env.example": func(k string) string { return env[k] },
	} {
		// Only the two durations: the rest of the file (its listen
		// address, its database) is not what this checks.
		c, err := parseConfig("tallyd", nil, func(k string) string {
			if k == "TALLY_SHUTDOWN_TIMEOUT" || k == "TALLY_SHUTDOWN_DELAY" {
				return getenv(k)
			}
			return ""
		}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if drain := c.ShutdownTimeout + c.ShutdownDelay; stop <= drain {
			t.Errorf("TimeoutStopSec %s is not above --shutdown-timeout + --shutdown-delay (%s) with %s: systemd would kill a drain", stop, drain, name)
		}
	}
}

// Point 3: "a Dockerfile (static binary on a minimal base, non-root,
// HEALTHCHECK on /healthz)". The build stage runs deploy/build.sh (static,
// -trimpath, the version from a build argument); the final stage is
// distroless static or scratch, as a non-root user, exposing the port of
// its TALLY_LISTEN; and its HEALTHCHECK, run as the image runs it (exec
// form, the binary the image copies), succeeds against a live tallyd.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := regexp.MustCompile(`(?m)^FROM `).Split(string(b), -1)
	if len(stages) < 3 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and a final one", len(stages)-1)
	}
	build, final := stages[1], stages[len(stages)-1]
	if !regexp.MustCompile(`(?m)^RUN sh deploy/build.sh \S+ "\$VERSION"$`).MatchString(build) || !strings.Contains(build, "ARG VERSION") {
		t.Errorf("the build stage does not run deploy/build.sh OUTPUT \"$VERSION\" from ARG VERSION:\n%s", build)
	}
	script, err := os.ReadFile(filepath.Join(root, "deploy", "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=${version}", "./cmd/tallyd"} {
		if !strings.Contains(string(script), want) {
			t.Errorf("deploy/build.sh lacks %s", want)
		}
	}
	base := strings.Fields(final)[0]
	if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("final stage FROM %s, want distroless static or scratch", base)
	}
	directive := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + ` (.+)$`).FindStringSubmatch(final)
		if m == nil {
			t.Fatalf("final stage has no %s", name)
		}
		return m[1]
	}
	if user := directive("USER"); strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0:") || user == "0" {
		t.Errorf("USER %s, want a non-root user", user)
	}
	listen := regexp.MustCompile(`TALLY_LISTEN=(\S+)`).FindStringSubmatch(final)
	if listen == nil || !strings.HasSuffix(listen[1], ":"+directive("EXPOSE")) {
		t.Errorf("EXPOSE %s is not the port of TALLY_LISTEN %v", directive("EXPOSE"), listen)
	}
	copied := regexp.MustCompile(`(?m)^COPY --from=build \S+ (\S+)$`).FindStringSubmatch(final)
	if copied == nil {
		t.Fatal("final stage copies no binary from the build stage")
	}
	_, hcExec, ok := strings.Cut(directive("HEALTHCHECK"), "CMD ")
	var hc []string
	if !ok || json.Unmarshal([]byte(hcExec), &hc) != nil || len(hc) < 2 || hc[0] != copied[1] {
		t.Fatalf("HEALTHCHECK %q: want CMD in exec form running %s (no shell in the image)", directive("HEALTHCHECK"), copied[1])
	}

	d := startTallyd(t, "--credentials-file", writeCredentials(t))
	addr := strings.TrimPrefix(d.base, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, hc[1:], env(map[string]string{"TALLY_LISTEN": addr}), io.Discard, io.Discard); err != nil {
		t.Errorf("the HEALTHCHECK command %q against a live tallyd on %s: %v", hc, addr, err)
	}
}
