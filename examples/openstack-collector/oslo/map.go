package oslo

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
)

// Platform is the platform every mapped event names.
const Platform = "openstack"

// The resource types the mapping produces; each matches a size schema the
// server seeds under platform "openstack" (canonical-event.md, Size
// schemas).
const (
	ResourceInstance     = "instance"
	ResourceVolume       = "volume"
	ResourceFloatingIP   = "floating_ip"
	ResourceImage        = "image"
	ResourceLoadBalancer = "loadbalancer"
)

// ErrUnmappable is matched by every [*UnmappableError].
var ErrUnmappable = errors.New("oslo: notification cannot be mapped")

// UnmappableError reports a notification that cannot become a canonical
// event, with every reason found (the timestamp, the resource id, the
// project, the state, the size), so a collector can report it rather than
// drop it. errors.Is(err, ErrUnmappable) holds.
type UnmappableError struct {
	// EventType is the oslo event_type, "" when the line was not a
	// notification at all.
	EventType string
	// Reasons are the problems, each naming the member it concerns.
	Reasons []string
}

// Error joins the reasons with "; ".
func (e *UnmappableError) Error() string {
	return strings.Join(e.Reasons, "; ")
}

// Is reports whether target is [ErrUnmappable].
func (e *UnmappableError) Is(target error) bool { return target == ErrUnmappable }

// Mapper maps notifications of one cloud. The zero value is not usable:
// Cloud must be set. A Mapper is a value with no state, safe for concurrent
// use.
type Mapper struct {
	// Cloud names the OpenStack installation the notifications come from;
	// every event carries it as cloud. 1 to 512 bytes, not meta or partner.
	Cloud string
}

// Map parses one notification ([Parse]) and maps it ([Mapper.MapNotification]).
// A line that is not a notification is reported as an [*UnmappableError]
// too.
func (m Mapper) Map(raw []byte) (event.Event, error) {
	n, err := Parse(raw)
	if err != nil {
		return event.Event{}, &UnmappableError{Reasons: []string{err.Error()}}
	}
	return m.MapNotification(n)
}

// MapNotification maps one notification to a canonical event and checks it
// with [event.Validate]. It returns an [*UnmappableError] when the
// notification cannot map, and an error matching [event.ErrInvalid]
// (wrapping the [*event.Error]) when the mapped event breaks a rule of the
// spec; in both cases nothing must be sent.
//
// The rules:
//
//   - platform is "openstack", cloud is m.Cloud, source is collector, and
//     event_type is the oslo event_type unchanged (so [event.Categorize]
//     derives the category from it). A type outside the five families of
//     the package documentation is unmappable.
//   - event_id is the oslo message_id (W: message_id, L:
//     metadata.message_id). Where there is none (every V line) it is
//     [event.DeterministicID] of ("openstack", cloud, resource_id,
//     event_type, timestamp), computed on the timestamp truncated to
//     microseconds, as the server stores it.
//   - timestamp is the envelope's (W: timestamp, L: metadata.timestamp),
//     read by [ParseTime]: a time without a zone is UTC. A timestamp that is
//     there but does not parse makes the notification unmappable; nothing
//     else is substituted for it. Only when the envelope has none (V) is it
//     taken from the resource's own record, the first set of: for a delete,
//     deleted_at, terminated_at, updated_at, created_at; otherwise
//     updated_at, launched_at, created_at. (A V line describes the record
//     as the event left it, so updated_at is when the event happened, and
//     deleted_at is the more precise moment of a delete.)
//     payload.provider.timestamp_from names the member used.
//   - project_id is the owner in the payload (nova and cinder tenant_id or
//     project_id, neutron floatingip.tenant_id or project_id, glance owner,
//     octavia project_id), else the request context's project_id,
//     tenant_id, project or tenant (W: _context_*, L: ctxt.*).
//   - payload.state is the resource's state as the service reports it
//     (nova state, cinder status, neutron floatingip.status, glance
//     status, octavia provisioning_status), unchanged. A delete needs none.
//     Any other event without one is unmappable: the state is required, and
//     guessing one would write a false state into the projection (neutron's
//     2012 floatingip.update.end has no status, and a later associate
//     reports DOWN, so a status cannot be derived from port_id).
//   - payload.size is the full size whenever the payload gives all of it,
//     with exact JSON numbers (no float64 anywhere):
//     instance {vcpus, ram_gb = memory_mb/1024, disk_gb = root_gb +
//     ephemeral_gb (swap is not disk; an absent ephemeral_gb counts 0; a
//     legacy payload's own disk_gb, which nova computes the same way, is
//     used when it has no root_gb), flavor = the flavor name}, from the
//     versioned flavor object or the legacy flat members (instance_type);
//     volume {size_gb = size, type = volume_type, the type id cinder sends,
//     which the server's size names replace by the type's name};
//     floating_ip {ip_version 4 or 6, from floating_ip_address};
//     image {size_gb = size/2^30, exact; a null size, which glance sends
//     before any data is uploaded, is 0}; loadbalancer {listeners, pools:
//     the lengths of those arrays}. An incomplete size is left out, except
//     on a create, which requires it and is then unmappable.
//   - payload.provider holds a few raw members for audit: oslo_event_type,
//     envelope (V, W or L), publisher_id, priority, message_id, request_id,
//     user_id, timestamp_from, and per resource type: instance task_state
//     (legacy state_description), power_state, flavor_id (legacy
//     instance_flavor_id), instance_type_id (legacy), host; floating
//     IP floating_ip_address, fixed_ip_address, port_id, router_id; image
//     disk_format, container_format; load balancer operating_status and
//     octavia_provider. Null and "" members are left out. Never the whole
//     notification (it holds auth tokens and service catalogs).
func (m Mapper) MapNotification(n *Notification) (event.Event, error) {
	fail := func(reasons ...string) (event.Event, error) {
		return event.Event{}, &UnmappableError{EventType: n.EventType, Reasons: reasons}
	}
	rt, mapFn := resourceFor(n.EventType)
	if mapFn == nil {
		return fail(fmt.Sprintf("event_type %q is not supported (instance.*, compute.instance.*, volume.*, floatingip.*, image.*, octavia.loadbalancer.*)", clip(n.EventType)))
	}
	cat := event.Categorize(n.EventType)
	r := mapFn(n)
	var reasons []string

	ts, timestampFrom, err := r.timestamp(n, cat)
	if err != nil {
		reasons = append(reasons, err.Error())
	}
	if r.resourceID == "" {
		reasons = append(reasons, fmt.Sprintf("resource id: the payload has none of %s", r.idMembers))
	}
	project := first(r.project, n.Context.Str("project_id"), n.Context.Str("tenant_id"), n.Context.Str("project"), n.Context.Str("tenant"))
	if project == "" {
		reasons = append(reasons, fmt.Sprintf("project: the payload has none of %s and the context none of project_id, tenant_id, project, tenant", r.projectMembers))
	}
	if r.state == "" && cat != event.CategoryDelete {
		reasons = append(reasons, fmt.Sprintf("state: %s is missing or empty, and every event except a delete requires a state (none is guessed)", r.stateMember))
	}
	if len(r.sizeMissing) > 0 && cat == event.CategoryCreate {
		reasons = append(reasons, fmt.Sprintf("size: a create requires the full size, and the payload lacks %s", strings.Join(r.sizeMissing, ", ")))
	}
	if reasons != nil {
		return fail(reasons...)
	}

	ev := event.Event{
		EventID:      n.MessageID,
		Timestamp:    ts,
		EventType:    n.EventType,
		Platform:     Platform,
		Cloud:        m.Cloud,
		ResourceType: rt,
		ResourceID:   r.resourceID,
		ProjectID:    project,
		Source:       event.SourceCollector,
	}
	if ev.EventID == "" {
		ev.EventID = event.DeterministicID(Platform, m.Cloud, r.resourceID, n.EventType, ts)
	}
	if r.state != "" {
		ev.Payload.State = event.StateOf(r.state)
	}
	if len(r.sizeMissing) == 0 && r.size != nil {
		ev.Payload.Size = encodeObject(r.size)
	}
	ev.Payload.Provider = encodeObject(m.provider(n, r, timestampFrom))
	if err := event.Validate(&ev); err != nil {
		return event.Event{}, fmt.Errorf("oslo: mapped event is invalid: %w", err)
	}
	return ev, nil
}

func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}

// member is one member of an object the mapping writes, in order.
type member struct {
	name  string
	value jsontext.Value
}

func encodeObject(ms []member) jsontext.Value {
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf)
	_ = enc.WriteToken(jsontext.BeginObject)
	for _, m := range ms {
		_ = enc.WriteToken(jsontext.String(m.name))
		_ = enc.WriteValue(m.value)
	}
	_ = enc.WriteToken(jsontext.EndObject)
	return jsontext.Value(bytes.TrimSpace(buf.Bytes()))
}

func quoted(s string) jsontext.Value {
	b, _ := jsontext.AppendQuote(nil, s)
	return b
}

// resource is what one resource family reads from a payload.
type resource struct {
	resourceID     string
	idMembers      string // for the report when resourceID is ""
	project        string // from the payload; "" to fall back on the context
	projectMembers string
	state          string
	stateMember    string
	size           []member
	sizeMissing    []string
	times          Object // where the fallback timestamps live
	timesPath      string
	requestID      string // from the payload, when the context has none
	userID         string
	extra          []member
}

func resourceFor(eventType string) (string, func(*Notification) resource) {
	switch {
	case strings.HasPrefix(eventType, "instance."), strings.HasPrefix(eventType, "compute.instance."):
		return ResourceInstance, instance
	case strings.HasPrefix(eventType, "volume."):
		return ResourceVolume, volume
	case strings.HasPrefix(eventType, "floatingip."):
		return ResourceFloatingIP, floatingIP
	case strings.HasPrefix(eventType, "image."):
		return ResourceImage, image
	case strings.HasPrefix(eventType, "octavia.loadbalancer."):
		return ResourceLoadBalancer, loadBalancer
	}
	return "", nil
}

// timestamp returns the event's time and, when it came from the payload,
// the member it came from.
func (r *resource) timestamp(n *Notification, cat event.Category) (time.Time, string, error) {
	if n.Timestamp != "" {
		t, err := ParseTime(n.Timestamp)
		if err != nil {
			return time.Time{}, "", fmt.Errorf("timestamp: %w", err)
		}
		return t, "", nil
	}
	order := []string{"updated_at", "launched_at", "created_at"}
	if cat == event.CategoryDelete {
		order = []string{"deleted_at", "terminated_at", "updated_at", "created_at"}
	}
	for _, k := range order {
		s := r.times.Str(k)
		if s == "" || s == "None" {
			continue
		}
		t, err := ParseTime(s)
		if err != nil {
			return time.Time{}, "", fmt.Errorf("timestamp: the envelope has none, and %s%s: %w", r.timesPath, k, err)
		}
		return t, r.timesPath + k, nil
	}
	return time.Time{}, "", fmt.Errorf("timestamp: the envelope has none, and the payload none of %s%s", r.timesPath, strings.Join(order, ", "+r.timesPath))
}

func (m Mapper) provider(n *Notification, r resource, timestampFrom string) []member {
	var ms []member
	add := func(name, s string) {
		if s != "" {
			ms = append(ms, member{name, quoted(s)})
		}
	}
	add("oslo_event_type", n.EventType)
	add("envelope", string(n.Shape))
	add("publisher_id", n.PublisherID)
	add("priority", n.Priority)
	add("message_id", n.MessageID)
	add("request_id", first(n.Context.Str("request_id"), r.requestID))
	add("user_id", first(n.Context.Str("user_id"), n.Context.Str("user"), r.userID))
	add("timestamp_from", timestampFrom)
	return append(ms, r.extra...)
}

// copyMembers appends the members of o named in names (renamed when a name
// is "from=to") that are set, neither null nor "".
func copyMembers(ms []member, o Object, names ...string) []member {
	for _, name := range names {
		from, to, ok := strings.Cut(name, "=")
		if !ok {
			to = from
		}
		if o.present(from) {
			ms = append(ms, member{to, o[from]})
		}
	}
	return ms
}

func instance(n *Notification) resource {
	d, path := n.Payload.Obj("nova_object.data"), "payload.nova_object.data."
	versioned := d != nil
	if !versioned {
		d, path = n.Payload, "payload."
	}
	r := resource{
		resourceID:     first(d.Str("uuid"), d.Str("instance_id")),
		idMembers:      path + "uuid, " + path + "instance_id",
		project:        first(d.Str("tenant_id"), d.Str("project_id")),
		projectMembers: path + "tenant_id, " + path + "project_id",
		state:          d.Str("state"),
		stateMember:    path + "state",
		times:          d,
		timesPath:      path,
		requestID:      d.Str("request_id"),
		userID:         d.Str("user_id"),
	}
	flavor, flavorName, flavorPath := d, d.Str("instance_type"), path
	if versioned {
		flavor = d.Obj("flavor").Obj("nova_object.data")
		flavorPath = path + "flavor.nova_object.data."
		flavorName = flavor.Str("name")
	}
	var missing []string
	need := func(k string) (*big.Rat, string) {
		v, lit, ok := flavor.Num(k)
		if !ok {
			missing = append(missing, flavorPath+k)
		}
		return v, lit
	}
	_, vcpus := need("vcpus")
	mem, _ := need("memory_mb")
	var disk *big.Rat
	if root, _, ok := flavor.Num("root_gb"); ok {
		disk = root
		if eph, _, ok := flavor.Num("ephemeral_gb"); ok {
			disk = new(big.Rat).Add(root, eph)
		}
	} else if dg, _, ok := flavor.Num("disk_gb"); ok && !versioned {
		disk = dg
	} else {
		missing = append(missing, flavorPath+"root_gb")
	}
	if flavorName == "" {
		if versioned {
			missing = append(missing, flavorPath+"name")
		} else {
			missing = append(missing, path+"instance_type")
		}
	}
	if len(missing) == 0 {
		ram, ok1 := exactDecimal(divPow2(mem, 10))
		diskGB, ok2 := exactDecimal(disk)
		if !ok1 || !ok2 {
			missing = append(missing, "a finite decimal memory_mb/1024 and root_gb+ephemeral_gb")
		} else {
			r.size = []member{
				{"vcpus", jsontext.Value(vcpus)},
				{"ram_gb", jsontext.Value(ram)},
				{"disk_gb", jsontext.Value(diskGB)},
				{"flavor", quoted(flavorName)},
			}
		}
	}
	r.sizeMissing = missing
	if versioned {
		r.extra = copyMembers(r.extra, d, "task_state", "power_state")
		r.extra = copyMembers(r.extra, flavor, "flavorid=flavor_id")
	} else {
		r.extra = copyMembers(r.extra, d, "state_description=task_state", "instance_flavor_id=flavor_id", "instance_type_id")
	}
	r.extra = copyMembers(r.extra, d, "host")
	return r
}

func volume(n *Notification) resource {
	p := n.Payload
	r := resource{
		resourceID:     first(p.Str("volume_id"), p.Str("id")),
		idMembers:      "payload.volume_id, payload.id",
		project:        first(p.Str("tenant_id"), p.Str("project_id")),
		projectMembers: "payload.tenant_id, payload.project_id",
		state:          p.Str("status"),
		stateMember:    "payload.status",
		times:          p,
		timesPath:      "payload.",
		userID:         p.Str("user_id"),
	}
	_, size, ok := p.Num("size")
	if !ok {
		r.sizeMissing = append(r.sizeMissing, "payload.size")
	}
	typ := p.Str("volume_type")
	if typ == "" {
		r.sizeMissing = append(r.sizeMissing, "payload.volume_type")
	}
	if r.sizeMissing == nil {
		r.size = []member{{"size_gb", jsontext.Value(size)}, {"type", quoted(typ)}}
	}
	return r
}

func floatingIP(n *Notification) resource {
	p := n.Payload
	fip := p.Obj("floatingip")
	r := resource{
		resourceID:     first(fip.Str("id"), p.Str("floatingip_id"), p.Str("id")),
		idMembers:      "payload.floatingip.id, payload.floatingip_id, payload.id",
		project:        first(fip.Str("tenant_id"), fip.Str("project_id")),
		projectMembers: "payload.floatingip.tenant_id, payload.floatingip.project_id",
		state:          fip.Str("status"),
		stateMember:    "payload.floatingip.status",
		times:          fip,
		timesPath:      "payload.floatingip.",
	}
	if addr, err := netip.ParseAddr(fip.Str("floating_ip_address")); err == nil {
		v := "6"
		if addr.Unmap().Is4() {
			v = "4"
		}
		r.size = []member{{"ip_version", jsontext.Value(v)}}
	} else {
		r.sizeMissing = []string{"payload.floatingip.floating_ip_address (an IPv4 or IPv6 address)"}
	}
	r.extra = copyMembers(r.extra, fip, "floating_ip_address", "fixed_ip_address", "port_id", "router_id")
	return r
}

func image(n *Notification) resource {
	p := n.Payload
	r := resource{
		resourceID:     p.Str("id"),
		idMembers:      "payload.id",
		project:        p.Str("owner"),
		projectMembers: "payload.owner",
		state:          p.Str("status"),
		stateMember:    "payload.status",
		times:          p,
		timesPath:      "payload.",
	}
	var bytes *big.Rat
	if v, ok := p["size"]; ok && v.Kind() == 'n' {
		bytes = new(big.Rat) // no data uploaded yet
	} else if b, _, ok := p.Num("size"); ok {
		bytes = b
	}
	if bytes == nil {
		r.sizeMissing = []string{"payload.size"}
	} else if gb, ok := exactDecimal(divPow2(bytes, 30)); ok {
		r.size = []member{{"size_gb", jsontext.Value(gb)}}
	} else {
		r.sizeMissing = []string{"payload.size (a finite decimal number of bytes)"}
	}
	r.extra = copyMembers(r.extra, p, "disk_format", "container_format")
	return r
}

func loadBalancer(n *Notification) resource {
	p := n.Payload
	r := resource{
		resourceID:     first(p.Str("loadbalancer_id"), p.Str("id")),
		idMembers:      "payload.loadbalancer_id, payload.id",
		project:        first(p.Str("project_id"), p.Str("tenant_id")),
		projectMembers: "payload.project_id, payload.tenant_id",
		state:          p.Str("provisioning_status"),
		stateMember:    "payload.provisioning_status",
		times:          p,
		timesPath:      "payload.",
	}
	listeners, ok1 := p.Len("listeners")
	pools, ok2 := p.Len("pools")
	if !ok1 {
		r.sizeMissing = append(r.sizeMissing, "payload.listeners")
	}
	if !ok2 {
		r.sizeMissing = append(r.sizeMissing, "payload.pools")
	}
	if r.sizeMissing == nil {
		r.size = []member{
			{"listeners", jsontext.Value(fmt.Sprint(listeners))},
			{"pools", jsontext.Value(fmt.Sprint(pools))},
		}
	}
	r.extra = copyMembers(r.extra, p, "operating_status", "provider=octavia_provider")
	return r
}
