-- The webhook tables hold WEBHOOK_URLS as written (credentials and query tokens included, which
-- GET /webhooks redacts). The analyze role reads every table of the schema through the default
-- privileges its provisioning set; PostgreSQL, not only the analyze guard, keeps it out of these
-- two. Provisioning leaves them out too (provisionGroupRoles in src/db/roles.ts).
do $$
declare
  grantee oid;
begin
  for grantee in
    select distinct a.grantee
    from pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
    where c.oid in ('webhook_endpoint'::regclass, 'webhook_delivery'::regclass)
      and a.grantee <> c.relowner
  loop
    if grantee = 0 then
      revoke all on table webhook_endpoint, webhook_delivery from public;
    else
      execute pg_catalog.format('revoke all on table webhook_endpoint, webhook_delivery from %I',
        (select rolname from pg_catalog.pg_roles where oid = grantee));
    end if;
  end loop;
end $$;
