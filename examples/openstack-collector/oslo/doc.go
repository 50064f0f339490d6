// Package oslo maps OpenStack oslo.messaging notifications to canonical
// lifecycle events (docs/spec/canonical-event.md). It is the mapping
// half of the openstack-collector example; it does no I/O beyond reading
// the lines it is given, and it never sends anything.
//
// # Envelopes
//
// [Parse] recognises the three envelope shapes of the notification corpus
// (testdata/openstack/README.md, "Three envelope shapes") and the
// messagingv2 wrapper:
//
//   - [ShapeVersioned] (V): only event_type, priority, publisher_id and
//     payload, as nova's documentation samples are written. No message_id
//     and no timestamp.
//   - [ShapeWire] (W): the flat envelope of the messaging driver, with
//     message_id, timestamp and the request context spread into _context_*
//     keys. A {"oslo.version", "oslo.message"} wrapper (messagingv2) is
//     unwrapped first.
//   - [ShapeListener] (L): what a notification endpoint receives, with the
//     context nested under ctxt and metadata = {message_id, timestamp}.
//
// # Mapping
//
// [Mapper.Map] turns one notification into one [event.Event] of platform
// "openstack" and the mapper's cloud, for five resource types:
//
//	event_type prefix                  resource_type  state                   size
//	instance.*, compute.instance.*     instance       state                   vcpus, ram_gb, disk_gb, flavor
//	volume.*                           volume         status                  size_gb, type
//	floatingip.*                       floating_ip    floatingip.status       ip_version
//	image.*                            image          status                  size_gb
//	octavia.loadbalancer.*             loadbalancer   provisioning_status     listeners, pools
//
// The oslo event_type is kept as the canonical event_type, so
// [event.Categorize] reads it directly: instance.create.end is a create,
// volume.delete.end and image.delete are deletes, floatingip.update.end
// and volume.attach.end are updates.
//
// The rules where the spec leaves room, each documented on [Mapper.Map]:
// where the event id, the timestamp and the project come from; how sizes
// are computed (exact decimals, never a float64); what a notification that
// cannot map produces (an [*UnmappableError] listing every reason, never a
// silent drop).
//
// [Reader] applies a [Mapper] to JSON lines and numbers them, so that a
// collector can report each line it could not map.
package oslo
