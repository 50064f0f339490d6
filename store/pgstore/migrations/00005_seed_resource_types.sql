-- +goose Up
-- The five size schemas every database knows without an operator registering
-- anything (canonical-event.md, Size schemas), all under platform openstack,
-- all admitting further members. Each text is byte-identical to
-- internal/seed/schemas/<resource_type>.json with surrounding whitespace trimmed,
-- which is what internal/seed.ResourceTypes returns (a test in store/pgstore
-- compares them): the column is json, so these bytes are what reads back.
INSERT INTO resource_types (platform, resource_type, size_schema, version, updated_at) VALUES
('openstack', 'floating_ip', '{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "openstack floating_ip size",
  "type": "object",
  "properties": {
    "ip_version": {"enum": [4, 6]}
  },
  "required": ["ip_version"],
  "additionalProperties": true
}', 1, now()),
('openstack', 'image', '{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "openstack image size",
  "type": "object",
  "properties": {
    "size_gb": {"type": "number", "minimum": 0}
  },
  "required": ["size_gb"],
  "additionalProperties": true
}', 1, now()),
('openstack', 'instance', '{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "openstack instance size",
  "type": "object",
  "properties": {
    "vcpus": {"type": "integer", "minimum": 1},
    "ram_gb": {"type": "number", "exclusiveMinimum": 0},
    "disk_gb": {"type": "number", "minimum": 0},
    "flavor": {"type": "string"}
  },
  "required": ["vcpus", "ram_gb", "disk_gb", "flavor"],
  "additionalProperties": true
}', 1, now()),
('openstack', 'loadbalancer', '{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "openstack loadbalancer size",
  "type": "object",
  "properties": {
    "listeners": {"type": "integer", "minimum": 0},
    "pools": {"type": "integer", "minimum": 0}
  },
  "required": ["listeners", "pools"],
  "additionalProperties": true
}', 1, now()),
('openstack', 'volume', '{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "openstack volume size",
  "type": "object",
  "properties": {
    "size_gb": {"type": "number", "exclusiveMinimum": 0},
    "type": {"type": "string"}
  },
  "required": ["size_gb", "type"],
  "additionalProperties": true
}', 1, now());

-- +goose Down
DELETE FROM resource_types
WHERE platform = 'openstack'
  AND resource_type IN ('floating_ip', 'image', 'instance', 'loadbalancer', 'volume');
