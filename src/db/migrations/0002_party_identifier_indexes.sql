-- Identifier queries (a phone number, an e-mail address; src/db/search-repo.ts identifierVcons)
-- find the vCons of a party that has it exactly, on every search route. Why a schema change: the
-- lookup runs on every such query, and without an index it reads and normalises every party row
-- (two per vCon, 200k at 100k vCons). What it costs: two more index entries per party on every
-- write, as the optional trigram indexes of the substring filters do. Phone numbers are indexed by
-- the last 7 of their digits, whatever the notation; e-mail addresses case-insensitively.
create index vcon_parties_tel_tail_idx on vcon_parties (right(regexp_replace(tel, '[^0-9]', '', 'g'), 7));
create index vcon_parties_mailto_lower_idx on vcon_parties (lower(mailto));
