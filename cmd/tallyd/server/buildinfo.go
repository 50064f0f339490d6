package server

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Build names the build of a running tallyd, as `tallyd --version` prints
// it and the gauge tally_build_info labels it.
type Build struct {
	// Version is the release, such as "v0.3.0": the version the binary
	// was stamped with (-ldflags "-X main.version=…"), else the main
	// module's version as the go command recorded it ("(devel)" for a
	// build from a checkout).
	Version string
	// Revision is the VCS commit the binary was built from, with
	// "+dirty" when the work tree had changes; "unknown" when the go
	// command recorded none (a build outside a repository, or with
	// -buildvcs=false).
	Revision string
	// GoVersion is the Go toolchain's, such as "go1.26.0".
	GoVersion string
}

// ReadBuild returns the running binary's Build; version, when not empty,
// is the release it was stamped with.
func ReadBuild(version string) Build {
	b := Build{Version: version, Revision: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if b.Version == "" {
			b.Version = "unknown"
		}
		return b
	}
	if b.Version == "" {
		b.Version = info.Main.Version
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.Revision != "unknown" {
		b.Revision += "+dirty"
	}
	return b
}

// String is the line `tallyd --version` prints: "tallyd <version>
// (revision <revision>, <go version>)".
func (b Build) String() string {
	return "tallyd " + b.Version + " (revision " + b.Revision + ", " + b.GoVersion + ")"
}

// buildInfoGauge is tally_build_info{version,revision,goversion}, always 1,
// the Prometheus convention for a build's labels.
func buildInfoGauge(b Build) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tally_build_info",
		Help: "Always 1; its labels name the running build: version (the release, or (devel)), revision (the VCS commit, +dirty for a modified tree) and goversion.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
	return g
}
