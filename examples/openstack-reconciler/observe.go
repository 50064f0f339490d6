package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumetypes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/reconcile"
)

// errNarrowed ends a run whose account cannot see the whole cloud.
var errNarrowed = errors.New("the account cannot see the whole cloud")

// source says where and how to list one cloud.
type source struct {
	entry        string        // the clouds.yaml entry
	cloudsYAML   string        // its path; "" searches as the OpenStack clients do
	reachRole    string        // the role that gives cloud-wide reach
	allowNarrow  bool          // post creates and updates only when the reach is not proven
	deleteWindow time.Duration // how far back nova's deleted servers are read
	httpClient   *http.Client
	now          func() time.Time
}

// observe lists the cloud of src.entry and returns the observation. It
// checks the account's reach first (a token holding src.reachRole, then one
// server listing across all projects): a refusal is an error naming the
// entry; a token without the role is errNarrowed unless src.allowNarrow,
// when the observation lists no type as complete and no delete.
func observe(ctx context.Context, src source) (reconcile.Observation, error) {
	fail := func(what string, err error) error {
		return fmt.Errorf("clouds.yaml entry %q: %s: %w", src.entry, what, err)
	}
	opts := []clouds.ParseOption{clouds.WithCloudName(src.entry)}
	if src.cloudsYAML != "" {
		opts = append(opts, clouds.WithLocations(src.cloudsYAML))
	}
	auth, eo, tlsConfig, err := clouds.Parse(opts...)
	if err != nil {
		return reconcile.Observation{}, fail("read", err)
	}
	provider, err := newProvider(ctx, auth, src.httpClient, tlsConfig)
	if err != nil {
		return reconcile.Observation{}, fail("authenticate", err)
	}
	complete, err := reach(provider, src)
	if err != nil {
		return reconcile.Observation{}, fail("check the account's reach", err)
	}
	obs := reconcile.Observation{Platform: "openstack", ObservedAt: event.Normalize(src.now())}
	compute, err := openstack.NewComputeV2(provider, eo)
	if err != nil {
		return reconcile.Observation{}, fail("compute endpoint", err)
	}
	if err := listServers(ctx, compute, &obs); err != nil {
		return reconcile.Observation{}, fail("list servers across all projects", err)
	}
	block, err := openstack.NewBlockStorageV3(provider, eo)
	if err != nil {
		return reconcile.Observation{}, fail("block-storage endpoint", err)
	}
	if err := listVolumes(ctx, block, &obs); err != nil {
		return reconcile.Observation{}, fail("list volumes", err)
	}
	if complete {
		obs.CompleteTypes = []string{"instance", "volume"}
		since := obs.ObservedAt.Add(-src.deleteWindow)
		if err := listDeletedServers(ctx, compute, since, &obs); err != nil {
			return reconcile.Observation{}, fail("list deleted servers", err)
		}
	}
	return obs, nil
}

// newProvider authenticates: through hc when given (the tests' server),
// else with the entry's TLS settings.
func newProvider(ctx context.Context, auth gophercloud.AuthOptions, hc *http.Client, tlsConfig *tls.Config) (*gophercloud.ProviderClient, error) {
	switch {
	case hc != nil:
		return config.NewProviderClient(ctx, auth, config.WithHTTPClient(*hc))
	case tlsConfig != nil:
		return config.NewProviderClient(ctx, auth, config.WithTLSConfig(tlsConfig))
	}
	return config.NewProviderClient(ctx, auth)
}

// reach reports whether the token holds src.reachRole: without it nova
// refuses the all-projects listing (403) on current releases, but cinder,
// neutron, glance and octavia answer 200 with the project's own resources,
// listings that look complete and are not (docs/reconciliation.md, The
// narrowed-listing trap).
func reach(provider *gophercloud.ProviderClient, src source) (bool, error) {
	res, ok := provider.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return false, errors.New("the token's roles cannot be read (not a Keystone v3 password or application-credential login)")
	}
	roles, err := res.ExtractRoles()
	if err != nil {
		return false, err
	}
	for _, r := range roles {
		if r.Name == src.reachRole {
			return true, nil
		}
	}
	if src.allowNarrow {
		return false, nil
	}
	return false, fmt.Errorf("%w: the token holds no %q role, so cinder would answer a narrowed volume listing 200 OK; "+
		"nothing was posted (--allow-narrowed posts creates and updates only, never a delete)", errNarrowed, src.reachRole)
}

// serverState is the part of a server listing gophercloud's Server does
// not decode: nova's vm_state, the state a collector's notification names.
type serverState struct {
	ID      string `json:"id"`
	VMState string `json:"OS-EXT-STS:vm_state"`
}

// listServers adds every server of every project (the reach probe: a 403
// ends the run) with its flavor's size.
func listServers(ctx context.Context, compute *gophercloud.ServiceClient, obs *reconcile.Observation) error {
	pages, err := servers.List(compute, servers.ListOpts{AllTenants: true}).AllPages(ctx)
	if err != nil {
		return err
	}
	list, err := servers.ExtractServers(pages)
	if err != nil {
		return err
	}
	var states []serverState
	if err := servers.ExtractServersInto(pages, &states); err != nil {
		return err
	}
	vmState := make(map[string]string, len(states))
	for _, s := range states {
		vmState[s.ID] = s.VMState
	}
	fpages, err := flavors.ListDetail(compute, flavors.ListOpts{AccessType: flavors.AllAccess}).AllPages(ctx)
	if err != nil {
		return fmt.Errorf("list flavors: %w", err)
	}
	fl, err := flavors.ExtractFlavors(fpages)
	if err != nil {
		return err
	}
	byID := make(map[string]flavors.Flavor, len(fl))
	for _, f := range fl {
		byID[f.ID] = f
	}
	for _, s := range list {
		size, err := flavorSize(s.Flavor, byID)
		if err != nil {
			return fmt.Errorf("server %s: %w", s.ID, err)
		}
		state := vmState[s.ID]
		if state == "" {
			state = strings.ToLower(s.Status)
		}
		obs.Resources = append(obs.Resources, reconcile.Resource{ResourceType: "instance", ResourceID: s.ID,
			ProjectID: s.TenantID, State: state, Size: size})
	}
	return nil
}

// flavorSize is an instance's size as the collector maps it (package
// oslo): vcpus, ram_gb = ram MiB / 1024 (exact), disk_gb = root disk +
// ephemeral, flavor = the flavor's name. The flavor is embedded in the
// server (microversion 2.47 on) or named by id and listed.
func flavorSize(ref map[string]any, byID map[string]flavors.Flavor) (jsontext.Value, error) {
	var f flavors.Flavor
	if name, ok := ref["original_name"].(string); ok {
		f.Name = name
		f.VCPUs, f.RAM, f.Disk, f.Ephemeral = number(ref["vcpus"]), number(ref["ram"]), number(ref["disk"]), number(ref["ephemeral"])
	} else {
		id, _ := ref["id"].(string)
		var ok bool
		if f, ok = byID[id]; !ok {
			return nil, fmt.Errorf("flavor %q is not listed", id)
		}
	}
	ram := strconv.FormatFloat(float64(f.RAM)/1024, 'f', -1, 64)
	return json.Marshal(struct {
		VCPUs  int            `json:"vcpus"`
		RAMGB  jsontext.Value `json:"ram_gb"`
		DiskGB int            `json:"disk_gb"`
		Flavor string         `json:"flavor"`
	}{f.VCPUs, jsontext.Value(ram), f.Disk + f.Ephemeral, f.Name})
}

func number(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// listVolumes adds every volume of every project, its type as the type's
// id (what cinder's notifications carry), and cinder's volume types as the
// cloud's size names (id → name).
func listVolumes(ctx context.Context, block *gophercloud.ServiceClient, obs *reconcile.Observation) error {
	tpages, err := volumetypes.List(block, volumetypes.ListOpts{}).AllPages(ctx)
	if err != nil {
		return fmt.Errorf("list volume types: %w", err)
	}
	types, err := volumetypes.ExtractVolumeTypes(tpages)
	if err != nil {
		return err
	}
	idOf := make(map[string]string, len(types))
	obs.SizeNames = []reconcile.SizeName{}
	for _, t := range types {
		idOf[t.Name] = t.ID
		obs.SizeNames = append(obs.SizeNames, reconcile.SizeName{ResourceType: "volume", Member: "type", Value: t.ID, Name: t.Name})
	}
	vpages, err := volumes.List(block, volumes.ListOpts{AllTenants: true}).AllPages(ctx)
	if err != nil {
		return err
	}
	vols, err := volumes.ExtractVolumes(vpages)
	if err != nil {
		return err
	}
	for _, v := range vols {
		typ := v.VolumeType
		if id, ok := idOf[typ]; ok {
			typ = id
		}
		size, err := json.Marshal(struct {
			SizeGB int    `json:"size_gb"`
			Type   string `json:"type"`
		}{v.Size, typ})
		if err != nil {
			return err
		}
		obs.Resources = append(obs.Resources, reconcile.Resource{ResourceType: "volume", ResourceID: v.ID,
			ProjectID: v.TenantID, State: v.Status, Size: size})
	}
	return nil
}

// listDeletedServers adds the servers nova reports deleted since since,
// dated by their last update (the one listing that dates a missed delete).
func listDeletedServers(ctx context.Context, compute *gophercloud.ServiceClient, since time.Time, obs *reconcile.Observation) error {
	pages, err := servers.List(compute, servers.ListOpts{AllTenants: true, ChangesSince: since.UTC().Format(time.RFC3339)}).AllPages(ctx)
	if err != nil {
		return err
	}
	list, err := servers.ExtractServers(pages)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	for _, r := range obs.Resources {
		listed[r.ResourceType+"/"+r.ResourceID] = true
	}
	for _, s := range list {
		if !strings.EqualFold(s.Status, "DELETED") || listed["instance/"+s.ID] {
			continue
		}
		at := event.Normalize(s.Updated)
		if at.IsZero() || at.After(obs.ObservedAt) {
			at = obs.ObservedAt
		}
		obs.Deletes = append(obs.Deletes, reconcile.Delete{ResourceType: "instance", ResourceID: s.ID, DeletedAt: at})
	}
	return nil
}
