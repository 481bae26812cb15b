import { describe, expect, it } from 'vitest';
import { checkPlan, checkStatement, loadParser } from '../../src/services/analyze-guard.js';
import { prettyBytes } from '../../src/services/database-service.js';
import { ValidationError } from '../../src/domain/errors.js';

const SCHEMA = 'grp';
const accepted = async (q: string) => (await checkStatement(q, SCHEMA)).statement;
const refused = async (q: string): Promise<string> => {
  try {
    await checkStatement(q, SCHEMA);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as Error).message;
  }
  throw new Error(`accepted: ${q}`);
};

describe('the analyze guard judges the parse tree of POST /database/analyze', () => {
  it.each([
    ['select 1', 'select 1'],
    ["SELECT * FROM vcons WHERE subject = 'a;b';", "SELECT * FROM vcons WHERE subject = 'a;b'"],
    ['select 1; -- trailing comment', 'select 1'],
    ['select 1;;', 'select 1'],
    ["select 'é', 'ü' ; ", "select 'é', 'ü'"],
    ['with t as (select 1 as x) select x from t', 'with t as (select 1 as x) select x from t'],
    ['(select 1) union (select 2)', '(select 1) union (select 2)'],
    ['values (1), (2)', 'values (1), (2)'],
    ["select subject like 'a!%' escape '!' from vcons", "select subject like 'a!%' escape '!' from vcons"],
    ['select $$; drop table vcons$$, $tag$ ; $tag$', 'select $$; drop table vcons$$, $tag$ ; $tag$'],
    ["select E'it\\'s; fine'", "select E'it\\'s; fine'"],
    ['select "update", "delete" from "into"', 'select "update", "delete" from "into"'],
    ['select updated_at, created_at from vcons /* ; delete */', 'select updated_at, created_at from vcons /* ; delete */'],
    ['select 1 /* nested /* ; */ still comment ; */', 'select 1 /* nested /* ; */ still comment ; */'],
    ["select case when 1 = 1 then 2 end, doc->>'start' from vcons", "select case when 1 = 1 then 2 end, doc->>'start' from vcons"],
    [
      "select count(*) filter (where v.subject ilike '%x%'), extract(year from v.created_at)::int from grp.vcons v where v.created_at between now() - interval '7 days' and now() group by 2 order by 1 desc",
      "select count(*) filter (where v.subject ilike '%x%'), extract(year from v.created_at)::int from grp.vcons v where v.created_at between now() - interval '7 days' and now() group by 2 order by 1 desc",
    ],
    [
      "select e.key, e.value from vcons, jsonb_each(doc) as e where doc @> '{}' and doc ? 'subject' and not exists (select 1 from vcon_tags t where t.uuid = vcons.uuid)",
      "select e.key, e.value from vcons, jsonb_each(doc) as e where doc @> '{}' and doc ? 'subject' and not exists (select 1 from vcon_tags t where t.uuid = vcons.uuid)",
    ],
  ])('accepts %s', async (q, statement) => {
    expect(await accepted(q)).toBe(statement);
  });

  it('refuses DML, DDL and other commands', async () => {
    expect(await refused('insert into vcons (uuid) values (gen_random_uuid())')).toMatch(/data-modifying.*INSERT/);
    expect(await refused('UPDATE vcons SET subject = null')).toMatch(/data-modifying.*UPDATE/);
    expect(await refused('delete from vcons')).toMatch(/data-modifying.*DELETE/);
    expect(await refused('drop table vcons')).toMatch(/DDL.*DROP/);
    expect(await refused('create table x (a int)')).toMatch(/DDL.*CREATE/);
    expect(await refused('alter table vcons add column x int')).toMatch(/DDL.*ALTER/);
    expect(await refused('truncate vcons')).toMatch(/TRUNCATE/);
    expect(await refused('vacuum vcons')).toMatch(/DDL.*VACUUM/);
    expect(await refused('copy vcons to stdout')).toMatch(/only a single SELECT.*COPY/);
    expect(await refused('explain select 1')).toMatch(/only a single SELECT.*EXPLAIN/);
    expect(await refused('set search_path to public')).toMatch(/only a single SELECT/);
    expect(await refused('')).toMatch(/empty/);
    expect(await refused('  -- only a comment\n')).toMatch(/empty/);
    expect(await refused(';')).toMatch(/empty/);
    expect(await refused('selec 1')).toMatch(/not valid SQL: syntax error at or near "selec" \(at character 1\)/);
  });

  it('refuses multiple statements, including ones hidden after comments', async () => {
    expect(await refused('select 1; select 2')).toMatch(/single statement/);
    expect(await refused('select 1; delete from vcons')).toMatch(/single statement/);
    expect(await refused('select 1 -- harmless\n; drop table vcons')).toMatch(/single statement/);
    expect(await refused('select 1 /* a */; /* b */ drop table vcons')).toMatch(/single statement/);
    expect(await refused("select 'x'; drop table vcons; --'")).toMatch(/single statement/);
  });

  it('refuses SELECT INTO, locking clauses, data-modifying CTEs and parameters', async () => {
    expect(await refused('select * into copy_of_vcons from vcons')).toMatch(/SELECT INTO/);
    expect(await refused('select * from vcons for update')).toMatch(/locking/);
    expect(await refused('select * from vcons FOR NO KEY UPDATE')).toMatch(/locking/);
    expect(await refused('select * from vcons for share')).toMatch(/locking/);
    expect(await refused('select * from vcons for key share skip locked')).toMatch(/locking/);
    expect(await refused('with d as (delete from vcons returning uuid) select * from d')).toMatch(/data-modifying.*DELETE.*WITH/);
    expect(await refused('with u as (update vcons set subject = null returning 1) select 1')).toMatch(/data-modifying/);
    expect(await refused('with i as (insert into vcon_tags values (null) returning 1) select 1')).toMatch(/data-modifying.*INSERT/);
    expect(await refused('select * from vcons where uuid = $1')).toMatch(/parameters/);
    // In either arm of a set operation, whose nodes the parse tree holds without their wrapper.
    expect(await refused('select * into t from vcons union select * from vcons')).toMatch(/SELECT INTO/);
    expect(await refused('select 1 union (select 1 from vcons for share)')).toMatch(/locking/);
    expect(await refused("select 1 union select 'x'::regclass")).toMatch(/type regclass/);
  });

  it('refuses functions off the allowlist, quoted, qualified, spaced or written U&"..."', async () => {
    for (const [q, name] of [
      ['select pg_sleep(10)', 'pg_sleep'],
      ['select pg_catalog.pg_sleep (10)', 'pg_catalog.pg_sleep'],
      ['select "pg_sleep"(1)', 'pg_sleep'],
      ["select pg_sleep_for('1 minute')", 'pg_sleep_for'],
      ["select * from dblink('host=x', 'select 1') as t(a int)", 'dblink'],
      ["select lo_import('/etc/passwd')", 'lo_import'],
      ["select pg_read_file('/etc/passwd')", 'pg_read_file'],
      ["select pg_ls_dir('.')", 'pg_ls_dir'],
      ['select pg_terminate_backend(1)', 'pg_terminate_backend'],
      ['select pg_advisory_lock(1)', 'pg_advisory_lock'],
      ["select set_config('search_path', 'public', false)", 'set_config'],
      ["select query_to_xml('delete from vcons', true, true, '')", 'query_to_xml'],
      ["select nextval('s')", 'nextval'],
      ["select current_setting('data_directory')", 'current_setting'],
      ["select length(repeat('x', 1000000000))", 'repeat'],
      ["select format('%1000000000s', 'x')", 'format'],
      ["select lower(subject) from vcons where grp.lower(subject) = 'a'", 'grp.lower'],
      [`select U&"\\0071uery_to_xml"('select 1', true, false, '')`, 'query_to_xml'],
      [`select u&"\\0070g_read_file"('/etc/hostname')`, 'pg_read_file'],
      [`select U&"!0070g_sleep" UESCAPE '!'(1)`, 'pg_sleep'],
      [`select U&"\\+000070g_ls_dir"('.')`, 'pg_ls_dir'],
    ]) {
      expect(await refused(q)).toContain(`function ${name}() is not allowed in analyze`);
    }
  });

  it("refuses casts to name types, operators off the list, catalogs and other schemas' relations", async () => {
    expect(await refused("select 'vcons'::regclass")).toMatch(/type regclass is not allowed/);
    expect(await refused('select 18107::oid')).toMatch(/type oid is not allowed/);
    expect(await refused("select cast('x' as pg_catalog.regtype)")).toMatch(/type pg_catalog.regtype is not allowed/);
    expect(await refused("select regnamespace 'public'")).toMatch(/type regnamespace is not allowed/);
    expect(await refused('select 1::grp.mytext')).toMatch(/type grp.mytext is not allowed/);
    expect(await refused('select * from generate_series(1, 2) as t(a regclass)')).toMatch(/type regclass is not allowed/);
    expect(await refused('select 1 operator(grp.+) 2')).toMatch(/operator OPERATOR\(grp\.\+\) is not allowed/);
    expect(await refused('select 1 ### 2')).toMatch(/operator ### is not allowed/);
    expect(await refused('select relname from pg_class')).toMatch(/reads pg_class, a system catalog/);
    expect(await refused('select * from pg_catalog.pg_settings')).toMatch(/reads pg_catalog.pg_settings, outside/);
    expect(await refused('select * from other.vcons')).toMatch(/reads other.vcons, outside this group's schema "grp"/);
    expect(await refused('select * from information_schema.tables')).toMatch(/outside/);
    expect(await refused("select xmlelement(name a, 'x')")).toMatch(/XmlExpr is not allowed/);
    expect(await refused('select * from vcons tablesample system_rows(10)')).toMatch(/TABLESAMPLE/);
  });

  it('refuses a CASE that fails a cast only when a condition holds: the cast type is refused, whatever the branch', async () => {
    expect(await refused("select case when (select count(*) from vcons) > 0 then 'x'::regclass end")).toMatch(/type regclass/);
  });

  it('reports the names of attribute notation, which the service checks against the catalog', async () => {
    expect((await checkStatement('select (18107).pg_stat_get_live_tuples', SCHEMA)).fieldNames).toEqual(['pg_stat_get_live_tuples']);
    expect((await checkStatement('select v.subject, (jsonb_each(doc)).key from vcons v', SCHEMA)).fieldNames.sort()).toEqual(['key', 'subject']);
    expect((await checkStatement('select v.*, v.length from vcons v', SCHEMA)).fieldNames).toEqual([]);
  });

  it('refuses statements nested too deeply to check with a 400, and parses the next one', async () => {
    expect(await refused('select 1' + '+1'.repeat(9990))).toMatch(/nested too deeply/);
    expect(await refused('select ' + 'lower('.repeat(3000) + "'a'" + ')'.repeat(3000))).toMatch(/nested too deeply/);
    expect(await accepted('select ' + '('.repeat(5000) + '1' + ')'.repeat(5000))).toHaveLength(10_008);
    expect(await accepted('select 1')).toBe('select 1');
  });

  it('checks plans with PostgreSQL scanner: functions and name types in any expression', async () => {
    await loadParser();
    expect(() => checkPlan({ Plan: { Output: ['lower(vcons.subject)', 'COALESCE((SubPlan 1), 0)', "'a''b'::text"] } }, 'grp')).not.toThrow();
    expect(() => checkPlan({ Plan: { Filter: '(pg_stat_get_live_tuples(18107::oid) > 0)' } }, 'grp')).toThrow(
      /pg_stat_get_live_tuples\(\) is not allowed/,
    );
    expect(() => checkPlan({ Plan: { Output: ['"pg_sleep"(1)'] } }, 'grp')).toThrow(/pg_sleep\(\) is not allowed/);
    expect(() => checkPlan({ Plan: { Output: ["'x'::character varying(10)", "'vcons'::regclass"] } }, 'grp')).toThrow(/regclass value/);
    expect(() => checkPlan({ Plan: { 'Relation Name': 'pg_class', Schema: 'pg_catalog' } }, 'grp')).toThrow(/reads pg_catalog.pg_class/);
  });

  it('formats sizes as pg_size_pretty does', () => {
    expect(prettyBytes(8192)).toBe('8192 bytes');
    expect(prettyBytes(16384)).toBe('16 kB');
    expect(prettyBytes(50 * 1024 * 1024)).toBe('50 MB');
  });
});
