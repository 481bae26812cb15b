import { describe, expect, it } from 'vitest';
import { checkReadOnlyStatement, decodeUnicodeEscapes, prettyBytes, tokenizeSql } from '../../src/services/database-service.js';
import { ValidationError } from '../../src/domain/errors.js';

const refused = (q: string): string => {
  try {
    checkReadOnlyStatement(q);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as Error).message;
  }
  throw new Error(`accepted: ${q}`);
};

describe('read-only statement check of POST /database/analyze', () => {
  it.each([
    ['select 1', 'select 1'],
    ["SELECT * FROM vcons WHERE subject = 'a;b';", "SELECT * FROM vcons WHERE subject = 'a;b'"],
    ['select 1; -- trailing comment', 'select 1'],
    ['with t as (select 1 as x) select x from t', 'with t as (select 1 as x) select x from t'],
    ['(select 1) union (select 2)', '(select 1) union (select 2)'],
    ['select $$; drop table vcons$$, $tag$ ; $tag$', 'select $$; drop table vcons$$, $tag$ ; $tag$'],
    ["select E'it\\'s; fine'", "select E'it\\'s; fine'"],
    ['select "update", "delete" from "into"', 'select "update", "delete" from "into"'],
    ['select updated_at, created_at from vcons /* ; delete */', 'select updated_at, created_at from vcons /* ; delete */'],
    ['select 1 /* nested /* ; */ still comment ; */', 'select 1 /* nested /* ; */ still comment ; */'],
    ["select case when 1 = 1 then 2 end, doc->>'start' from vcons", "select case when 1 = 1 then 2 end, doc->>'start' from vcons"],
  ])('accepts %s', (q, statement) => {
    expect(checkReadOnlyStatement(q)).toBe(statement);
  });

  it('refuses DML, DDL and other commands', () => {
    expect(refused('insert into vcons (uuid) values (gen_random_uuid())')).toMatch(/data-modifying.*INSERT/);
    expect(refused('UPDATE vcons SET subject = null')).toMatch(/data-modifying.*UPDATE/);
    expect(refused('delete from vcons')).toMatch(/data-modifying.*DELETE/);
    expect(refused('drop table vcons')).toMatch(/DDL.*DROP/);
    expect(refused('create table x (a int)')).toMatch(/DDL.*CREATE/);
    expect(refused('alter table vcons add column x int')).toMatch(/DDL.*ALTER/);
    expect(refused('truncate vcons')).toMatch(/TRUNCATE/);
    expect(refused('vacuum vcons')).toMatch(/DDL.*VACUUM/);
    expect(refused('copy vcons to stdout')).toMatch(/only a single SELECT/);
    expect(refused('explain select 1')).toMatch(/only a single SELECT/);
    expect(refused('set search_path to public')).toMatch(/only a single SELECT/);
    expect(refused('values (1)')).toMatch(/only a single SELECT/);
    expect(refused('')).toMatch(/empty/);
    expect(refused('  -- only a comment\n')).toMatch(/empty/);
    expect(refused(';')).toMatch(/empty/);
  });

  it('refuses multiple statements, including ones hidden after comments', () => {
    expect(refused('select 1; select 2')).toMatch(/single statement/);
    expect(refused('select 1; delete from vcons')).toMatch(/single statement|DELETE/);
    expect(refused('select 1 -- harmless\n; drop table vcons')).toMatch(/single statement/);
    expect(refused('select 1 /* a */; /* b */ drop table vcons')).toMatch(/single statement/);
    expect(refused('select 1;;')).toMatch(/single statement/);
    expect(refused("select 'x'; drop table vcons; --'")).toMatch(/single statement/);
  });

  it('refuses SELECT INTO, locking clauses and data-modifying CTEs', () => {
    expect(refused('select * into copy_of_vcons from vcons')).toMatch(/SELECT INTO/);
    expect(refused('select * from vcons for update')).toMatch(/locking/);
    expect(refused('select * from vcons FOR NO KEY UPDATE')).toMatch(/locking/);
    expect(refused('select * from vcons for share')).toMatch(/locking/);
    expect(refused('select * from vcons for key share skip locked')).toMatch(/locking/);
    expect(refused('with d as (delete from vcons returning uuid) select * from d')).toMatch(/data-modifying.*DELETE.*WITH/);
    expect(refused('with u as (update vcons set subject = null returning 1) select 1')).toMatch(/data-modifying/);
    expect(refused('with i as (insert into vcon_tags values (null) returning 1) select 1')).toMatch(/INTO|data-modifying/);
  });

  it('refuses dangerous functions, quoted, qualified or spaced', () => {
    for (const q of [
      'select pg_sleep(10)',
      'select pg_catalog.pg_sleep (10)',
      'select "pg_sleep"(1)',
      "select pg_sleep_for('1 minute')",
      "select * from dblink('host=x', 'select 1') as t(a int)",
      "select lo_import('/etc/passwd')",
      "select pg_read_file('/etc/passwd')",
      "select pg_ls_dir('.')",
      'select pg_terminate_backend(1)',
      'select pg_advisory_lock(1)',
      "select set_config('search_path', 'public', false)",
      "select query_to_xml('delete from vcons', true, true, '')",
      "select nextval('s')",
    ]) {
      expect(refused(q)).toMatch(/is not allowed in analyze/);
    }
  });

  it('decodes U& identifiers as PostgreSQL does before judging them', () => {
    expect(refused(`select U&"\\0071uery_to_xml"('select 1', true, false, '')`)).toMatch(/query_to_xml\(\) is not allowed/);
    expect(refused(`select u&"\\0070g_read_file"('/etc/hostname')`)).toMatch(/pg_read_file\(\) is not allowed/);
    expect(refused(`select U&"!0070g_sleep" UESCAPE '!'(1)`)).toMatch(/pg_sleep\(\) is not allowed/);
    expect(refused(`select U&"\\+000070g_ls_dir"('.')`)).toMatch(/pg_ls_dir\(\) is not allowed/);
    expect(refused(`select U&"\\zz"`)).toMatch(/invalid Unicode escape/);
    expect(tokenizeSql(`select U&"d\\0061t\\+000061" from t`).map((t) => t.value)).toEqual(['select', 'data', 'from', 't']);
    expect(decodeUnicodeEscapes('a\\\\b\\00e9', '\\')).toBe('a\\bé');
    expect(checkReadOnlyStatement(`select U&'\\0041' as "U&x"`)).toBe(`select U&'\\0041' as "U&x"`);
  });

  it('refuses unterminated literals and comments rather than guessing', () => {
    expect(refused("select 'open")).toMatch(/unterminated string/);
    expect(refused('select $x$ open')).toMatch(/unterminated dollar/);
    expect(refused('select 1 /* open')).toMatch(/unterminated \/\*/);
    expect(refused('select "open')).toMatch(/unterminated quoted identifier/);
  });

  it('tokenizes literals and comments as the server does', () => {
    const t = tokenizeSql("select E'a\\'b', 'c''d', $q$x;y$q$, \"A\"\"B\", $1, 1.5e-3 -- c\n/* d */");
    expect(t.map((x) => x.kind)).toEqual([
      'word',
      'string',
      'punct',
      'string',
      'punct',
      'string',
      'punct',
      'quoted',
      'punct',
      'param',
      'punct',
      'number',
    ]);
    expect(t[7].value).toBe('A"B');
  });

  it('formats sizes as pg_size_pretty does', () => {
    expect(prettyBytes(8192)).toBe('8192 bytes');
    expect(prettyBytes(16384)).toBe('16 kB');
    expect(prettyBytes(50 * 1024 * 1024)).toBe('50 MB');
  });
});
