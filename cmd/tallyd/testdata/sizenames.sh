# docs/operations.md, "Size names and sync runs without SQL": the commands,
# run from the repository root against a tallyd with the two variables set
# (TALLY_SERVER, and TALLY_TOKEN of a credential with the read, admin and
# reconcile roles of cloud os-dev, as tallyd --dev prints).
# cmd/tallyd/sizenames_test.go runs exactly these commands against the real
# binary; keep docs/operations.md and this file the same.

# The size schemas sizes are validated with.
curl -s "$TALLY_SERVER/api/v1/resource-types" -H "Authorization: Bearer $TALLY_TOKEN"

# One size schema.
curl -s "$TALLY_SERVER/api/v1/resource-types/openstack/volume" -H "Authorization: Bearer $TALLY_TOKEN"

# Load the cloud's size names, and nothing else: a sync run whose observation lists no resources.
curl -s -X POST "$TALLY_SERVER/api/v1/clouds/os-dev/sync" -H "Authorization: Bearer $TALLY_TOKEN" -H 'Content-Type: application/json' -d '{"platform":"openstack","observed_at":"'"$(date -u +%FT%TZ)"'","size_names":[{"resource_type":"volume","member":"type","value":"7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203","name":"ssd"}]}'

# The cloud's recorded runs, newest first.
curl -s "$TALLY_SERVER/api/v1/sync-runs?cloud=os-dev&limit=10" -H "Authorization: Bearer $TALLY_TOKEN"

# A volume event sends the type's id: tallyd stores the name, and the id as reported.
curl -s -X POST "$TALLY_SERVER/api/v1/events" -H "Authorization: Bearer $TALLY_TOKEN" -H 'Content-Type: application/json' -d '[{"event_id":"vol-1-create","event_type":"volume.create.end","timestamp":"2026-11-01T00:00:00Z","platform":"openstack","cloud":"os-dev","resource_type":"volume","resource_id":"vol-1","project_id":"p1","source":"collector","payload":{"state":"available","size":{"size_gb":10,"type":"7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}}}]'
curl -s "$TALLY_SERVER/api/v1/events?resource_id=vol-1" -H "Authorization: Bearer $TALLY_TOKEN"
