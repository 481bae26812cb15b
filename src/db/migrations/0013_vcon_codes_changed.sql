-- Instances keep the sign codes of their group in memory for the candidate search and catch up on
-- recent writes through this column before every query (src/embeddings/code-index.ts).
alter table vcon_codes add column changed_at timestamptz not null default clock_timestamp();
create index vcon_codes_changed_idx on vcon_codes (changed_at);
