// Package seed holds the five size schemas every store holds from the
// start (canonical-event.md, Size schemas): the files under
// internal/seed/schemas, which store/memstore loads and the PostgreSQL
// migration 00005 inserts byte for byte.
package seed

import (
	"bytes"
	"embed"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/ingest"
)

// seedFS holds the five seeded size schemas, one file per resource type of
// platform openstack. The PostgreSQL migration inserts the same documents,
// byte for byte.
//
//go:embed schemas/*.json
var seedFS embed.FS

// Platform is the platform every seeded resource type is registered
// under.
const Platform = "openstack"

// seedTypes lists the seeded resource types in registry order (by name).
var seedTypes = []string{"floating_ip", "image", "instance", "loadbalancer", "volume"}

// ResourceTypes returns the five size schemas every store holds from the
// start (canonical-event.md, Size schemas), ordered by resource_type, each
// with Platform "openstack", Version 1 and a zero UpdatedAt (a store stamps
// it when it loads them):
//
//   - instance: vcpus integer ≥ 1, ram_gb number > 0, disk_gb number ≥ 0,
//     flavor string; all four required;
//   - volume: size_gb number > 0, type string; both required;
//   - floating_ip: ip_version 4 or 6; required;
//   - image: size_gb number ≥ 0; required;
//   - loadbalancer: listeners integer ≥ 0, pools integer ≥ 0; both required.
//
// Every schema admits further members. SizeSchema is the content of
// internal/seed/schemas/<resource_type>.json with surrounding whitespace trimmed;
// the PostgreSQL migration must insert exactly these bytes. The result is a
// fresh copy on each call; it is safe for concurrent use.
func ResourceTypes() []ingest.ResourceType {
	out := make([]ingest.ResourceType, 0, len(seedTypes))
	for _, name := range seedTypes {
		b, err := seedFS.ReadFile("schemas/" + name + ".json")
		if err != nil {
			panic("seed: embedded seed schema missing: " + err.Error()) // a build defect
		}
		out = append(out, ingest.ResourceType{
			Platform:     Platform,
			ResourceType: name,
			SizeSchema:   jsontext.Value(bytes.TrimSpace(b)),
			Version:      1,
		})
	}
	return out
}
