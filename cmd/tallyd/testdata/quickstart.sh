# The README quickstart after `go run ./cmd/tallyd --dev` (run from the
# repository root, with the two export lines tallyd printed).
# cmd/tallyd/quickstart_test.go runs exactly these commands against the real
# binary; keep the README and this file the same.

# Send the 30 real OpenStack notifications through the collector.
go run ./examples/openstack-collector --cloud os-dev < testdata/openstack/notifications.jsonl

# Post an item that is not a canonical event: refused, and kept as a dead letter.
curl -s -X POST "$TALLY_SERVER/api/v1/events" -H "Authorization: Bearer $TALLY_TOKEN" -H 'Content-Type: application/json' -d '{"event_id":"broken-1","platform":"openstack"}'

# List the dead letters.
curl -s "$TALLY_SERVER/api/v1/rejected-events" -H "Authorization: Bearer $TALLY_TOKEN"

# Report a failing connection twice, then its resolution: see Event-Disposition.
curl -s -D - -o /dev/null -X POST "$TALLY_SERVER/api/events" -H "Authorization: Bearer $TALLY_TOKEN" -H 'Content-Type: application/json' -d '{"category":"connection","action":"failed","severity":"error","description":"db-1 unreachable","correlationKey":"db-1/connection"}'
curl -s -D - -o /dev/null -X POST "$TALLY_SERVER/api/events" -H "Authorization: Bearer $TALLY_TOKEN" -H 'Content-Type: application/json' -d '{"category":"connection","action":"failed","severity":"error","description":"db-1 unreachable","correlationKey":"db-1/connection"}'
curl -s -D - -o /dev/null -X POST "$TALLY_SERVER/api/events" -H "Authorization: Bearer $TALLY_TOKEN" -H 'Content-Type: application/json' -d '{"category":"connection","action":"failed","severity":"informational","description":"db-1 reachable again","correlationKey":"db-1/connection","resolvedAt":"'"$(date -u +%FT%TZ)"'"}'

# The open-then-resolved event, counted twice.
curl -s "$TALLY_SERVER/api/events/list" -H "Authorization: Bearer $TALLY_TOKEN"
