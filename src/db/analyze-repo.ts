// The one place a caller's SQL text reaches PostgreSQL (POST /database/analyze), after the analyze
// guard passed it: on a connection of its own, opened for the call and closed after it; as the
// group's analyze role where the launcher made one (SELECT on this schema only), in a READ ONLY
// transaction that is always rolled back, with every setting made SET LOCAL. Directly, nothing of
// the session outlives the call. Behind PgBouncer (transaction pooling) the server connection
// goes back to PgBouncer's pool: what holds there is the rolled-back transaction, so settings end
// with it, while session-level state a statement could leave (an advisory lock) is refused by the
// guard before it reaches the server. No startup parameter but application_name is sent:
// PgBouncer refuses search_path, and the role pins it anyway.
import postgres from 'postgres';
import { searchPathOf, type Sql } from './client.js';
import { withCredentials } from './roles.js';

export interface ExplainResult {
  plan: unknown;
  search_path: string;
  /** The user PostgreSQL ran the statement as. */
  role: string;
}

export interface AnalyzeConnection {
  /** The server's URL (the pool's). */
  url: string;
  schema: string;
  /** The restricted role; undefined: the URL's own user. */
  user?: string;
  password?: string;
  applicationName?: string;
}

export interface ExplainOptions {
  analyze: boolean;
  timeoutMs: number;
  /** Bounds for the statement's sorts and hashes, and its temporary files. */
  workMemKb: number;
  tempFileLimitKb: number;
  /** Called with the plan of the unexecuted statement; throw to refuse it before it runs. */
  inspect(plan: unknown): void;
}

export function createAnalyzeRepo(conn: AnalyzeConnection) {
  const searchPath = searchPathOf(conn.schema);
  const url = withCredentials(conn.url, conn.user, conn.password);
  let opened = 0;
  return {
    schema: conn.schema,
    /** Whether statements run as a role of their own rather than the server's. */
    restricted: Boolean(conn.user),
    /** Connections opened since start: one per statement the guard let through. */
    get opened() {
      return opened;
    },

    async explain(statement: string, opts: ExplainOptions): Promise<ExplainResult> {
      const sql = postgres(url, {
        max: 1,
        connect_timeout: 5,
        idle_timeout: 1,
        onnotice: () => {},
        // No statement cache: the connection dies with the call anyway.
        prepare: false,
        connection: { application_name: conn.applicationName ?? `vcon-${conn.schema}-analyze` },
      }) as unknown as Sql;
      opened++;
      let result: ExplainResult | undefined;
      const rollback = new Error('rollback');
      try {
        await sql.begin('read only', async (tx) => {
          const [me] = await tx<{ role: string; superuser: string }[]>`
            select current_user as role, current_setting('is_superuser') as superuser,
                   set_config('statement_timeout', ${String(opts.timeoutMs)}, true),
                   set_config('lock_timeout', ${String(Math.min(opts.timeoutMs, 1000))}, true),
                   set_config('idle_in_transaction_session_timeout', ${String(opts.timeoutMs * 2)}, true),
                   set_config('work_mem', ${`${opts.workMemKb}kB`}, true),
                   set_config('search_path', ${searchPath}, true),
                   set_config('standard_conforming_strings', 'on', true)`;
          // temp_file_limit is a superuser setting: the launcher puts it on the analyze role; a
          // superuser connection (no roles) sets it here.
          if (me.superuser === 'on') await tx`select set_config('temp_file_limit', ${`${opts.tempFileLimitKb}kB`}, true)`;
          // `simple: false` (a runtime option postgres.js leaves out of its types) forces the
          // extended protocol even without parameters: the server then rejects a second statement.
          const protocol = { prepare: false, simple: false };
          const explain = async (options: string) => {
            const rows = await tx.unsafe(`explain (${options}) ${statement}`, [], protocol);
            return (rows[0] as Record<string, unknown> | undefined)?.['QUERY PLAN'] ?? null;
          };
          // With ANALYZE the statement runs: its plan is checked first, so nothing refused runs.
          const planned = await explain('verbose, format json');
          opts.inspect(planned);
          const plan = opts.analyze ? await explain('analyze, buffers, verbose, format json') : planned;
          result = { plan, search_path: searchPath, role: me.role };
          throw rollback;
        });
      } catch (err) {
        if (err !== rollback) throw err;
      } finally {
        // The connection is never reused: whatever the statement did to its session ends here.
        await sql.end({ timeout: 1 }).catch(() => undefined);
      }
      return result!;
    },
  };
}

export type AnalyzeRepo = ReturnType<typeof createAnalyzeRepo>;
