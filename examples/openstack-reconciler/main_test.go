package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/cmd/tallyd/server"
	"github.com/tallyhq/tally/store/memstore"
)

// fakeOpenStack is an httptest server answering as Keystone v3, nova and
// cinder v3 answer, in the shapes the OpenStack API reference documents
// (POST /v3/auth/tokens, GET /servers/detail, /flavors/detail,
// /types, /volumes/detail), for one admin project p-admin.
type fakeOpenStack struct {
	*httptest.Server
	roles     string // the token's roles, as JSON
	forbidden bool   // nova refuses all_tenants (403), as its policy does for a non-admin
	requests  []string
}

func newOpenStack(t *testing.T, roles string) *fakeOpenStack {
	o := &fakeOpenStack{roles: roles}
	o.Server = httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.Close)
	return o
}

func (o *fakeOpenStack) serve(w http.ResponseWriter, r *http.Request) {
	o.requests = append(o.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	w.Header().Set("Content-Type", "application/json")
	q := r.URL.Query()
	switch {
	case r.Method == "POST" && r.URL.Path == "/v3/auth/tokens":
		w.Header().Set("X-Subject-Token", "gAAAAAB-token")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(strings.NewReplacer("SRV", o.URL, "ROLES", o.roles).Replace(tokenAnswer)))
	case r.URL.Path == "/compute/v2.1/servers/detail" && o.forbidden && q.Get("all_tenants") != "":
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"forbidden": {"code": 403, "message": "Policy doesn't allow os_compute_api:servers:index:get_all_tenants to be performed."}}`))
	case r.URL.Path == "/compute/v2.1/servers/detail" && q.Get("changes-since") != "":
		_, _ = w.Write([]byte(`{"servers": [` + serverVM1 + `,` + serverGone + `]}`))
	case r.URL.Path == "/compute/v2.1/servers/detail":
		_, _ = w.Write([]byte(`{"servers": [` + serverVM1 + `]}`))
	case r.URL.Path == "/compute/v2.1/flavors/detail":
		_, _ = w.Write([]byte(flavorsAnswer))
	case r.URL.Path == "/volume/v3/p-admin/types":
		_, _ = w.Write([]byte(typesAnswer))
	case r.URL.Path == "/volume/v3/p-admin/volumes/detail":
		_, _ = w.Write([]byte(volumesAnswer))
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"itemNotFound": {"code": 404, "message": "not found"}}`))
	}
}

const tokenAnswer = `{"token": {"methods": ["password"], "expires_at": "2099-01-01T00:00:00.000000Z",
  "issued_at": "2026-03-01T11:00:00.000000Z",
  "user": {"id": "u-rec", "name": "reconciler", "domain": {"id": "default", "name": "Default"}, "password_expires_at": null},
  "project": {"id": "p-admin", "name": "admin", "domain": {"id": "default", "name": "Default"}},
  "roles": ROLES,
  "catalog": [
    {"id": "c-nova", "type": "compute", "name": "nova", "endpoints": [
      {"id": "e1", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": "SRV/compute/v2.1"}]},
    {"id": "c-cinder", "type": "block-storage", "name": "cinderv3", "endpoints": [
      {"id": "e2", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": "SRV/volume/v3/p-admin"}]}
  ]}}`

const serverVM1 = `{"id": "vm-1", "name": "web-1", "status": "ACTIVE", "tenant_id": "p1", "user_id": "u1",
  "flavor": {"id": "f-small", "links": [{"rel": "bookmark", "href": "http://nova/flavors/f-small"}]},
  "image": {"id": "img-1", "links": []}, "addresses": {}, "metadata": {}, "hostId": "h1",
  "created": "2026-02-01T10:00:00Z", "updated": "2026-02-01T10:05:00Z",
  "OS-EXT-STS:vm_state": "active", "OS-EXT-STS:task_state": null, "OS-EXT-STS:power_state": 1}`

const serverGone = `{"id": "vm-gone", "name": "old", "status": "DELETED", "tenant_id": "p2", "user_id": "u2",
  "flavor": {"id": "f-small", "links": []}, "image": "", "addresses": {}, "metadata": {}, "hostId": "",
  "created": "2026-01-01T10:00:00Z", "updated": "2026-03-01T09:30:00Z", "OS-EXT-STS:vm_state": "deleted"}`

const flavorsAnswer = `{"flavors": [{"id": "f-small", "name": "m1.small", "vcpus": 2, "ram": 4096, "disk": 20,
  "swap": "", "OS-FLV-EXT-DATA:ephemeral": 0, "rxtx_factor": 1.0, "os-flavor-access:is_public": true, "links": []}]}`

const typesAnswer = `{"volume_types": [{"id": "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203", "name": "ssd",
  "description": null, "is_public": true, "extra_specs": {"volume_backend_name": "ceph"}}]}`

const volumesAnswer = `{"volumes": [{"id": "vol-1", "name": "data", "status": "in-use", "size": 100,
  "volume_type": "ssd", "os-vol-tenant-attr:tenant_id": "p1", "availability_zone": "nova",
  "attachments": [], "metadata": {}, "bootable": "false", "encrypted": false,
  "created_at": "2026-02-01T10:00:00.000000", "updated_at": null}]}`

// tally is a tally server on the in-memory store that counts the sync
// requests it gets.
type tally struct {
	*httptest.Server
	syncs atomic.Int32
}

func newTally(t *testing.T) *tally {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := server.ParseCredentials([]byte(`{"credentials":[
	  {"name":"rec","token":"t-reconcile-token","roles":["reconcile"],"platform":"openstack","cloud":"os-a"},
	  {"name":"col","token":"t-collector-token","roles":["ingest"],"platform":"openstack","cloud":"os-a"},
	  {"name":"ops","token":"t-admin-token-001","roles":["read"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := server.NewAuthenticator(creds, server.AuthenticatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.New(server.Store{Ingest: db.Ingest(), Projection: db.Projection(), Correlate: db.Correlate(), Reconcile: db.Reconcile()},
		server.Options{Authenticator: a})
	if err != nil {
		t.Fatal(err)
	}
	tl := &tally{}
	tl.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/sync") {
			tl.syncs.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(tl.Close)
	return tl
}

func (tl *tally) do(t *testing.T, method, path, token, body string) string {
	t.Helper()
	r, err := http.NewRequest(method, tl.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b.String())
	}
	return b.String()
}

// cloudsYAML writes a clouds.yaml whose entry "lab" authenticates at o.
func cloudsYAML(t *testing.T, o *fakeOpenStack) string {
	p := filepath.Join(t.TempDir(), "clouds.yaml")
	yaml := "clouds:\n  lab:\n    auth:\n      auth_url: " + o.URL + "/v3\n      username: reconciler\n      password: secret\n" +
		"      project_name: admin\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n" +
		"    identity_api_version: 3\n"
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func runReconciler(t *testing.T, o *fakeOpenStack, tl *tally, extra ...string) (string, error) {
	args := append([]string{"--os-cloud", "lab", "--clouds-yaml", cloudsYAML(t, o), "--cloud", "os-a",
		"--server", tl.URL, "--token", "t-reconcile-token"}, extra...)
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, func(string) string { return "" }, &out, &errOut, &http.Client{})
	return out.String(), err
}

const adminRoles = `[{"id": "r-admin", "name": "admin"}, {"id": "r-member", "name": "member"}]`

// seed stores a collector's create of vm-gone, which nova reports deleted.
func seed(t *testing.T, tl *tally) {
	tl.do(t, "POST", "/api/v1/events", "t-collector-token", `{"event_id":"n-1","timestamp":"2026-01-01T10:00:00Z",`+
		`"event_type":"compute.instance.create.end","platform":"openstack","cloud":"os-a","resource_type":"instance",`+
		`"resource_id":"vm-gone","project_id":"p2","payload":{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}}`)
}

// The listings of an admin account become one observation: the server and
// volume are created (the volume under its type's name, the type's id kept
// in size_as_reported), the server nova dates deleted is deleted at its
// date; a second run changes nothing.
func TestReconcileRecordedAnswers(t *testing.T) {
	o, tl := newOpenStack(t, adminRoles), newTally(t)
	seed(t, tl)
	out, err := runReconciler(t, o, tl)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "2 resources, 1 deletes dated, 1 size names; created 2, updated 0, deleted 1, unchanged 0") {
		t.Errorf("first run: %s", out)
	}
	out, err = runReconciler(t, o, tl)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "created 0, updated 0, deleted 0, unchanged 2") {
		t.Errorf("second run: %s", out)
	}
	for path, want := range map[string]string{
		"/api/v1/resources/os-a/volume/vol-1":     `"size":{"size_gb":100,"type":"ssd"}`,
		"/api/v1/resources/os-a/volume/vol-1/":    `"size_as_reported":{"type":"7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}`,
		"/api/v1/resources/os-a/instance/vm-1":    `"size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`,
		"/api/v1/resources/os-a/instance/vm-gone": `"deleted_at":"2026-03-01T09:30:00Z"`,
	} {
		if got := tl.do(t, "GET", strings.TrimSuffix(path, "/"), "t-admin-token-001", ""); !strings.Contains(got, want) {
			t.Errorf("%s lacks %s: %s", path, want, got)
		}
	}
	if got := tl.do(t, "GET", "/api/v1/sync-runs?cloud=os-a", "t-admin-token-001", ""); strings.Count(got, `"run_id"`) != 2 {
		t.Errorf("sync-runs: %s", got)
	}
}

// An account whose all-projects server listing nova refuses (403): the run
// ends with an error naming the entry, and nothing is posted.
func TestReconcileForbidden(t *testing.T) {
	o, tl := newOpenStack(t, adminRoles), newTally(t)
	o.forbidden = true
	_, err := runReconciler(t, o, tl)
	if err == nil || !strings.Contains(err.Error(), `clouds.yaml entry "lab"`) || !strings.Contains(err.Error(), "403") {
		t.Fatalf("err %v, want a 403 naming the entry", err)
	}
	if n := tl.syncs.Load(); n != 0 {
		t.Errorf("%d observations posted", n)
	}
}

// The narrowed-listing trap: an account without the admin role, whose
// listings cinder and (older) nova answer 200 with its own project's
// resources. The run refuses before listing and posts nothing; with
// --allow-narrowed it posts creates and updates only: vm-gone, missing
// from the narrowed listing, is not deleted.
func TestReconcileNarrowed(t *testing.T) {
	o, tl := newOpenStack(t, `[{"id": "r-member", "name": "member"}]`), newTally(t)
	seed(t, tl)
	_, err := runReconciler(t, o, tl)
	if !errors.Is(err, errNarrowed) || !strings.Contains(err.Error(), `clouds.yaml entry "lab"`) {
		t.Fatalf("err %v, want errNarrowed naming the entry", err)
	}
	if n := tl.syncs.Load(); n != 0 {
		t.Fatalf("%d observations posted", n)
	}
	var listed []string
	for _, r := range o.requests {
		listed = append(listed, strings.SplitN(r, "?", 2)[0])
	}
	if diff := cmp.Diff([]string{"POST /v3/auth/tokens"}, listed); diff != "" {
		t.Errorf("requests before the refusal (-want +got):\n%s", diff)
	}
	out, err := runReconciler(t, o, tl, "--allow-narrowed")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "0 deletes dated") || !strings.Contains(out, "created 2, updated 0, deleted 0") {
		t.Errorf("narrowed run: %s", out)
	}
	if got := tl.do(t, "GET", "/api/v1/resources/os-a/instance/vm-gone", "t-admin-token-001", ""); !strings.Contains(got, `"deleted_at":null`) {
		t.Errorf("vm-gone was deleted by a narrowed run: %s", got)
	}
}
