-- +goose Up
-- The five size schemas every database knows without an operator registering
-- anything (canonical-event.md, Size schemas), all under platform openstack,
-- all admitting further members. The texts are byte-identical to the seed
-- documents in ingest/schemas/*.json (a test in store/pgstore compares them).
INSERT INTO resource_types (platform, resource_type, size_schema, version, updated_at) VALUES
('openstack', 'instance', '{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["vcpus","ram_gb","disk_gb","flavor"],"properties":{"vcpus":{"type":"integer","minimum":1},"ram_gb":{"type":"number","exclusiveMinimum":0},"disk_gb":{"type":"number","minimum":0},"flavor":{"type":"string"}}}', 1, now()),
('openstack', 'volume', '{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["size_gb","type"],"properties":{"size_gb":{"type":"number","exclusiveMinimum":0},"type":{"type":"string"}}}', 1, now()),
('openstack', 'floating_ip', '{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["ip_version"],"properties":{"ip_version":{"enum":[4,6]}}}', 1, now()),
('openstack', 'image', '{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["size_gb"],"properties":{"size_gb":{"type":"number","minimum":0}}}', 1, now()),
('openstack', 'loadbalancer', '{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["listeners","pools"],"properties":{"listeners":{"type":"integer","minimum":0},"pools":{"type":"integer","minimum":0}}}', 1, now());

-- +goose Down
DELETE FROM resource_types
WHERE platform = 'openstack'
  AND resource_type IN ('instance', 'volume', 'floating_ip', 'image', 'loadbalancer');
