package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/tallyhq/tally/sizenames"
)

// genConfig shapes the OpenStack workload.
type genConfig struct {
	Seed uint64
	// Prefix starts every cloud name, so that a run's rows are its own.
	Prefix string
	// Clouds is how many clouds send; each has its own ingest credential.
	Clouds int
	// Events is how many distinct valid events are sent in all.
	Events int
	// BatchSize is the number of items per batch (duplicates and invalid
	// items included).
	BatchSize int
	// LateShare is the share of events that arrive after a newer event of
	// their resource.
	LateShare float64
	// DupShare is the share of items that repeat an item sent before.
	DupShare float64
	// InvalidShare is the share of items that break a rule (half the
	// canonical schema, half a size schema).
	InvalidShare float64
}

// category of a generated event, decided by the generator from the type it
// picked (not by event.Categorize, so that the fold check is independent).
type category byte

const (
	catCreate category = 'c'
	catUpdate category = 'u'
	catDelete category = 'd'
)

// genEvent is one distinct valid event of the workload.
type genEvent struct {
	EventID      string
	Timestamp    time.Time
	EventType    string
	Category     category
	Cloud        string
	ResourceType string
	ResourceID   string
	ProjectID    string
	// State is "" on a delete (omitted).
	State string
	// SizeSent is the size as sent (provider ids), SizeWant as the store
	// keeps it once size names replaced the ids; both nil when absent.
	SizeSent, SizeWant []byte
	// Provider is the provider detail member of the payload.
	Provider []byte
}

type itemKind byte

const (
	itemValid itemKind = iota
	itemDup
	itemInvalidSchema
	itemInvalidSize
)

// item is one element of a batch.
type item struct {
	Kind itemKind
	// Ev is the event sent (itemValid, itemDup) or mutated (invalid kinds).
	Ev *genEvent
}

// batch is one call's worth of items, all of one cloud (one credential).
type batch struct {
	Cloud string
	Items []item
}

// workload is everything one ingest phase sends.
type workload struct {
	Clouds  []string
	Batches []batch
	// Events are the distinct valid events.
	Events []*genEvent
	// SizeNames are each cloud's size-name rows.
	SizeNames map[string][]sizenames.Row
	// Counts of items by kind, and of late events.
	Valid, Dups, Invalid, Late int
}

type resourceSpec struct {
	typ            string
	create, delete string
	updates        []string // update types carrying state (and size for the first)
	sizeOnUpdate   []bool
	states         []string // state per update type
	createState    string
}

// The five resource types the seeded size schemas cover.
var resourceSpecs = []resourceSpec{
	{typ: "instance", create: "compute.instance.create.end", delete: "compute.instance.delete.end",
		updates:      []string{"compute.instance.resize.confirm.end", "compute.instance.power_off.end", "compute.instance.power_on.end"},
		sizeOnUpdate: []bool{true, false, false}, states: []string{"active", "stopped", "active"}, createState: "active"},
	{typ: "volume", create: "volume.create.end", delete: "volume.delete.end",
		updates:      []string{"volume.resize.end", "volume.attach.end", "volume.detach.end"},
		sizeOnUpdate: []bool{true, false, false}, states: []string{"available", "in-use", "available"}, createState: "available"},
	{typ: "image", create: "image.create", delete: "image.delete",
		updates:      []string{"image.upload", "image.update"},
		sizeOnUpdate: []bool{true, false}, states: []string{"active", "active"}, createState: "queued"},
	{typ: "floating_ip", create: "floatingip.create.end", delete: "floatingip.delete.end",
		updates:      []string{"floatingip.update.end"},
		sizeOnUpdate: []bool{false}, states: []string{"ACTIVE"}, createState: "DOWN"},
	{typ: "loadbalancer", create: "octavia.loadbalancer.create.end", delete: "octavia.loadbalancer.delete.end",
		updates:      []string{"octavia.loadbalancer.update.end"},
		sizeOnUpdate: []bool{true}, states: []string{"ACTIVE"}, createState: "PENDING_CREATE"},
}

type flavor struct {
	name             string
	vcpus, ram, disk int
}

var flavors = []flavor{{"m1.small", 1, 2, 20}, {"m1.medium", 2, 4, 40}, {"m1.large", 4, 8, 80}, {"m1.xlarge", 8, 16, 160}}
var volumeTypes = []string{"ssd", "hdd", "nvme"}

type gen struct {
	cfg     genConfig
	rng     *rand.Rand
	flavors map[string][]string // cloud → flavor ids, parallel to flavors
	vtypes  map[string][]string // cloud → volume type ids, parallel to volumeTypes
}

func (g *gen) uuid() string {
	a, b := g.rng.Uint64(), g.rng.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, a>>16&0xffff, a&0xfff, 0x8000|b>>48&0x3fff, b&0xffffffffffff)
}

func (g *gen) hex32() string {
	return fmt.Sprintf("%016x%016x", g.rng.Uint64(), g.rng.Uint64())
}

type liveResource struct {
	spec    *resourceSpec
	id      string
	project string
	// size parameters, so that an update without size keeps it
	flavor int
	vtype  int
}

// size returns the size of r as sent and as the store keeps it.
func (g *gen) size(cloud string, r *liveResource) (sent, want []byte) {
	switch r.spec.typ {
	case "instance":
		f := flavors[r.flavor]
		sent = fmt.Appendf(nil, `{"vcpus":%d,"ram_gb":%d,"disk_gb":%d,"flavor":%q}`, f.vcpus, f.ram, f.disk, g.flavors[cloud][r.flavor])
		want = fmt.Appendf(nil, `{"vcpus":%d,"ram_gb":%d,"disk_gb":%d,"flavor":%q}`, f.vcpus, f.ram, f.disk, f.name)
	case "volume":
		gb := 10 * (1 + g.rng.IntN(50))
		sent = fmt.Appendf(nil, `{"size_gb":%d,"type":%q}`, gb, g.vtypes[cloud][r.vtype])
		want = fmt.Appendf(nil, `{"size_gb":%d,"type":%q}`, gb, volumeTypes[r.vtype])
	case "image":
		sent = fmt.Appendf(nil, `{"size_gb":%s}`, strconv.FormatFloat(float64(g.rng.IntN(4000))/100, 'f', -1, 64))
	case "floating_ip":
		sent = []byte(`{"ip_version":4}`)
		if g.rng.IntN(5) == 0 {
			sent = []byte(`{"ip_version":6}`)
		}
	case "loadbalancer":
		sent = fmt.Appendf(nil, `{"listeners":%d,"pools":%d}`, 1+g.rng.IntN(4), 1+g.rng.IntN(4))
	}
	if want == nil {
		want = sent
	}
	return sent, want
}

func (g *gen) provider() []byte {
	return fmt.Appendf(nil, `{"host":"compute-%d","availability_zone":"nova","request_id":"req-%s","user_id":"%s","publisher_id":"notifications.controller-%d","priority":"INFO"}`,
		g.rng.IntN(64), g.uuid(), g.hex32(), g.rng.IntN(3))
}

// generate builds the workload: for each cloud, resource lifecycles in
// timestamp order (create, updates, sometimes a delete), LateShare of the
// events moved to arrive after a newer event of their resource, then
// batches of BatchSize items with duplicates and invalid items mixed in;
// the clouds' batches interleave.
func generate(cfg genConfig) *workload {
	g := &gen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x7a11)), flavors: map[string][]string{}, vtypes: map[string][]string{}}
	w := &workload{SizeNames: map[string][]sizenames.Row{}}
	perCloud := make([][]batch, cfg.Clouds)
	for c := range cfg.Clouds {
		cloud := fmt.Sprintf("%s-%d", cfg.Prefix, c+1)
		w.Clouds = append(w.Clouds, cloud)
		for _, f := range flavors {
			id := g.uuid()
			g.flavors[cloud] = append(g.flavors[cloud], id)
			w.SizeNames[cloud] = append(w.SizeNames[cloud], sizenames.Row{Cloud: cloud, ResourceType: "instance", Member: "flavor", Value: id, Name: f.name})
		}
		for _, t := range volumeTypes {
			id := g.uuid()
			g.vtypes[cloud] = append(g.vtypes[cloud], id)
			w.SizeNames[cloud] = append(w.SizeNames[cloud], sizenames.Row{Cloud: cloud, ResourceType: "volume", Member: "type", Value: id, Name: t})
		}
		n := cfg.Events / cfg.Clouds
		if c < cfg.Events%cfg.Clouds {
			n++
		}
		evs := g.stream(cloud, c, n)
		w.Events = append(w.Events, evs...)
		order, late := g.arrival(evs)
		w.Late += late
		perCloud[c] = g.batches(cloud, order, w)
	}
	for i := 0; ; i++ {
		any := false
		for c := range perCloud {
			if i < len(perCloud[c]) {
				w.Batches = append(w.Batches, perCloud[c][i])
				any = true
			}
		}
		if !any {
			break
		}
	}
	return w
}

// workloadStart is the timestamp the workload's events start from; they
// span a few days of it.
var workloadStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// stream returns n events of one cloud in timestamp order.
func (g *gen) stream(cloud string, c, n int) []*genEvent {
	ts := workloadStart.Add(time.Duration(c) * time.Second)
	var live []*liveResource
	out := make([]*genEvent, 0, n)
	for len(out) < n {
		ts = ts.Add(time.Duration(1+g.rng.IntN(3)) * time.Millisecond)
		e := &genEvent{EventID: g.uuid(), Timestamp: ts, Cloud: cloud, Provider: g.provider()}
		if len(live) < 50 || (len(live) < 3000 && g.rng.IntN(100) < 30) {
			spec := &resourceSpecs[g.rng.IntN(len(resourceSpecs))]
			r := &liveResource{spec: spec, id: g.uuid(), project: fmt.Sprintf("project-%02d", g.rng.IntN(50)),
				flavor: g.rng.IntN(len(flavors)), vtype: g.rng.IntN(len(volumeTypes))}
			live = append(live, r)
			e.EventType, e.Category, e.State = spec.create, catCreate, spec.createState
			e.ResourceType, e.ResourceID, e.ProjectID = spec.typ, r.id, r.project
			e.SizeSent, e.SizeWant = g.size(cloud, r)
			out = append(out, e)
			continue
		}
		i := g.rng.IntN(len(live))
		r := live[i]
		e.ResourceType, e.ResourceID = r.spec.typ, r.id
		if g.rng.IntN(100) < 15 {
			e.EventType, e.Category = r.spec.delete, catDelete
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		} else {
			u := g.rng.IntN(len(r.spec.updates))
			e.EventType, e.Category, e.State = r.spec.updates[u], catUpdate, r.spec.states[u]
			if g.rng.IntN(100) < 2 { // an ownership transfer
				r.project = fmt.Sprintf("project-%02d", g.rng.IntN(50))
			}
			if r.spec.sizeOnUpdate[u] {
				r.flavor = g.rng.IntN(len(flavors))
				e.SizeSent, e.SizeWant = g.size(cloud, r)
			}
		}
		e.ProjectID = r.project
		out = append(out, e)
	}
	return out
}

// arrival returns the order events are sent in: timestamp order, except
// that LateShare of the events that have a newer event of their resource
// arrive after it (between 0 and 2000 positions later). It returns how many
// it made late.
func (g *gen) arrival(evs []*genEvent) ([]*genEvent, int) {
	type pos struct {
		at float64
		e  *genEvent
	}
	next := make(map[string]int) // resource → index of its newest event seen so far, walking backwards
	succ := make([]int, len(evs))
	for i := len(evs) - 1; i >= 0; i-- {
		k := evs[i].ResourceType + "/" + evs[i].ResourceID
		if j, ok := next[k]; ok {
			succ[i] = j
		} else {
			succ[i] = -1
		}
		next[k] = i
	}
	// Only an event with a newer one of its resource can be late: raise the
	// chance so that LateShare of all events are.
	eligible := 0
	for _, j := range succ {
		if j >= 0 {
			eligible++
		}
	}
	chance := 0.0
	if eligible > 0 {
		chance = min(1, g.cfg.LateShare*float64(len(evs))/float64(eligible))
	}
	ps := make([]pos, len(evs))
	late := 0
	for i, e := range evs {
		ps[i] = pos{float64(i), e}
		if succ[i] >= 0 && g.rng.Float64() < chance {
			ps[i].at = float64(succ[i]) + 0.5 + float64(g.rng.IntN(2000))
			late++
		}
	}
	slices.SortStableFunc(ps, func(a, b pos) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	out := make([]*genEvent, len(ps))
	for i, p := range ps {
		out[i] = p.e
	}
	return out, late
}

// batches cuts the arrival order of one cloud into batches of BatchSize
// items, mixing in duplicates of items sent before and invalid items.
func (g *gen) batches(cloud string, order []*genEvent, w *workload) []batch {
	var out []batch
	var sent []*genEvent
	cur := batch{Cloud: cloud}
	flush := func() {
		if len(cur.Items) > 0 {
			out = append(out, cur)
			cur = batch{Cloud: cloud}
		}
	}
	for len(order) > 0 {
		if len(cur.Items) == g.cfg.BatchSize {
			flush()
		}
		r := g.rng.Float64()
		switch {
		case r < g.cfg.DupShare && len(sent) > 0:
			d := sent[len(sent)-1-g.rng.IntN(min(len(sent), 3000))]
			cur.Items = append(cur.Items, item{Kind: itemDup, Ev: d})
			w.Dups++
		case r < g.cfg.DupShare+g.cfg.InvalidShare:
			e := *order[0]
			e.EventID = g.uuid()
			kind := itemInvalidSchema
			if g.rng.IntN(2) == 0 {
				kind = itemInvalidSize
			}
			cur.Items = append(cur.Items, item{Kind: kind, Ev: &e})
			w.Invalid++
		default:
			cur.Items = append(cur.Items, item{Kind: itemValid, Ev: order[0]})
			sent = append(sent, order[0])
			order = order[1:]
			w.Valid++
		}
	}
	flush()
	return out
}

// render appends the JSON item of it to buf. A valid or duplicate item is a
// canonical event; itemInvalidSchema has no project_id (canonical schema:
// required member); itemInvalidSize an instance-shaped size with vcpus 0
// (or, for the other types, a size missing its required members), which the
// seeded size schema refuses.
func render(buf []byte, it item) []byte {
	e := it.Ev
	buf = append(buf, `{"event_id":"`...)
	buf = append(buf, e.EventID...)
	buf = append(buf, `","timestamp":"`...)
	buf = e.Timestamp.AppendFormat(buf, "2006-01-02T15:04:05.000Z")
	buf = append(buf, `","event_type":"`...)
	buf = append(buf, e.EventType...)
	buf = append(buf, `","platform":"openstack","cloud":"`...)
	buf = append(buf, e.Cloud...)
	buf = append(buf, `","resource_type":"`...)
	buf = append(buf, e.ResourceType...)
	buf = append(buf, `","resource_id":"`...)
	buf = append(buf, e.ResourceID...)
	if it.Kind != itemInvalidSchema {
		buf = append(buf, `","project_id":"`...)
		buf = append(buf, e.ProjectID...)
	}
	buf = append(buf, `","payload":`...)
	buf = appendPayload(buf, e, it.Kind == itemInvalidSize)
	return append(buf, '}')
}

// appendPayload appends the payload object of e; badSize replaces the size
// by one the seeded schema refuses.
func appendPayload(buf []byte, e *genEvent, badSize bool) []byte {
	buf = append(buf, '{')
	if e.State != "" {
		buf = append(buf, `"state":"`...)
		buf = append(buf, e.State...)
		buf = append(buf, `",`...)
	}
	switch {
	case badSize && e.ResourceType == "instance":
		buf = append(buf, `"size":{"vcpus":0,"ram_gb":1,"disk_gb":1,"flavor":"x"},`...)
	case badSize:
		buf = append(buf, `"size":{},`...)
	case e.SizeSent != nil:
		buf = append(buf, `"size":`...)
		buf = append(buf, e.SizeSent...)
		buf = append(buf, ',')
	}
	buf = append(buf, `"provider":`...)
	buf = append(buf, e.Provider...)
	return append(buf, '}')
}

// rendered is a batch as JSON items.
type rendered struct {
	Cloud string
	Items [][]byte
}

// renderAll renders every batch of w; valid-only keeps only the distinct
// valid events (every one then a duplicate of the stored one).
func renderBatches(bs []batch) []rendered {
	out := make([]rendered, len(bs))
	for i, b := range bs {
		size := 0
		for _, it := range b.Items {
			size += 400 + len(it.Ev.Provider) + len(it.Ev.SizeSent)
		}
		arena := make([]byte, 0, size)
		items := make([][]byte, len(b.Items))
		for j, it := range b.Items {
			start := len(arena)
			arena = render(arena, it)
			items[j] = arena[start:len(arena):len(arena)]
		}
		out[i] = rendered{Cloud: b.Cloud, Items: items}
	}
	return out
}

// validBatches regroups the distinct valid events of w, in their arrival
// order, into batches of size n per cloud: the all-duplicates phase sends
// these after the library phase stored them.
func validBatches(w *workload, n int) []batch {
	var out []batch
	cur := map[string]*batch{}
	for _, b := range w.Batches {
		for _, it := range b.Items {
			if it.Kind != itemValid {
				continue
			}
			c := cur[b.Cloud]
			if c == nil {
				c = &batch{Cloud: b.Cloud}
				cur[b.Cloud] = c
			}
			c.Items = append(c.Items, it)
			if len(c.Items) == n {
				out = append(out, *c)
				delete(cur, b.Cloud)
			}
		}
	}
	for _, cloud := range w.Clouds {
		if c := cur[cloud]; c != nil {
			out = append(out, *c)
		}
	}
	return out
}
