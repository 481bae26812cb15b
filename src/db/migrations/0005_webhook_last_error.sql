-- What an endpoint's last failed attempt came to, and when (docs/webhooks.md, docs/architecture.md
-- "Webhooks"). Why a schema change: /health and `vcon-launch status` show why an endpoint is
-- failing or disabled, for the whole group (every replica's attempts land here), across restarts.
-- The deliveries' own last_error cannot say it: a pending delivery's row does not record when it
-- was last attempted, so the latest failure of an endpoint is not known from them. What it costs:
-- nothing more per attempt; the update a failed attempt already makes of the endpoint's row sets
-- them too. Adding nullable columns rewrites no row, and an older build, which never names them,
-- keeps working beside this one.
alter table webhook_endpoint
  -- In words that name no host or address (keyless /health shows it): "answered 500",
  -- "connection refused", "no response within 15 s". Kept after a success, with its time.
  add column last_error    text,
  add column last_error_at timestamptz;
