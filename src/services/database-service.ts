// The database use cases of one instance (docs/api.md "Database and analytics"): introspection of this
// schema (database-introspection.ts) and the plan of one read-only statement, judged by the
// analyze guard (analyze-guard.ts) before anything reaches PostgreSQL.
import { DatabaseBusyError, isDatabaseUnavailable, ValidationError } from '../domain/errors.js';
import { AnalyzeBody, parseBody } from '../domain/params.js';
import type { RequestCtx } from './context.js';
import type { IntrospectionRepo } from '../db/introspection-repo.js';
import type { AnalyzeRepo } from '../db/analyze-repo.js';
import { checkFieldNames, checkPlan, checkStatement, statementErrorOf } from './analyze-guard.js';
import { createIntrospection } from './database-introspection.js';

export type { Advice, Severity } from './database-introspection.js';
export { prettyBytes } from './database-introspection.js';

/** work_mem and temp_file_limit of an analyze statement: one sort can't fill the shared server's disk. */
export const ANALYZE_WORK_MEM_KB = 4 * 1024;
export const ANALYZE_TEMP_FILE_LIMIT_KB = 64 * 1024;
/** The longest statement timeout of POST /database/analyze (ms), whatever STATEMENT_TIMEOUT_MS says. */
export const ANALYZE_TIMEOUT_MAX_MS = 5_000;

/** What the database service needs: the schema-bound catalog repo and its limits. */
export interface DatabaseServiceDeps {
  repo: IntrospectionRepo;
  /** Runs the EXPLAIN of analyze on a connection of its own. */
  analyzer: AnalyzeRepo;
  /** statement_timeout of POST /database/analyze. */
  analyzeTimeoutMs: number;
  /** A query of this application running longer than this is reported by health. */
  longRunningS?: number;
  now?: () => Date;
}

/** Introspection of this instance's schema, and analyze. */
export function createDatabaseService(deps: DatabaseServiceDeps) {
  const { repo } = deps;
  return {
    ...createIntrospection(deps),

    /**
     * The plan of one read-only statement (EXPLAIN (FORMAT JSON), with ANALYZE when asked) in a
     * READ ONLY transaction with a statement timeout. The guard judges the parse tree first:
     * anything it refuses is a 400 and never reaches PostgreSQL.
     */
    async analyze(body: unknown, _ctx: RequestCtx) {
      const { query, analyze } = parseBody(AnalyzeBody, body);
      const { statement, fieldNames } = await checkStatement(query, repo.schema);
      if (fieldNames.length) checkFieldNames(await repo.functionsNamed(fieldNames));
      let result;
      try {
        result = await deps.analyzer.explain(statement, {
          analyze,
          timeoutMs: deps.analyzeTimeoutMs,
          workMemKb: ANALYZE_WORK_MEM_KB,
          tempFileLimitKb: ANALYZE_TEMP_FILE_LIMIT_KB,
          inspect: (plan) => checkPlan(plan, repo.schema),
        });
      } catch (err) {
        // The analyze role's CONNECTION LIMIT (53300) or the server's: busy, not the caller's fault.
        // The rest of class 53 (temp_file_limit's 53400, memory, disk) is the statement's own cost:
        // a 400 below, since trying it again would only meet the same limit.
        if ((err as { code?: unknown }).code === '53300') {
          throw new DatabaseBusyError(
            'analyze is at its connection limit (concurrent analyze calls of this group, or the server); retry shortly',
            'The launcher sets the analyze role\'s CONNECTION LIMIT from the connection budget (docs/deployment.md "Many groups on one database")',
          );
        }
        const code = (err as { code?: unknown }).code;
        // Any SQLSTATE of the caller's statement (XX000 from pg_describe_object included) is a 400;
        // an outage (08, 57P0x) or a driver error is not.
        if (err instanceof ValidationError || typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code) || isDatabaseUnavailable(err)) throw err;
        throw statementErrorOf(err as Error & { code: string }, deps.analyzeTimeoutMs);
      }
      return {
        schema: repo.schema,
        analyzed: analyze,
        read_only: true,
        statement_timeout_ms: deps.analyzeTimeoutMs,
        search_path: result.search_path,
        note:
          `Run as ${deps.analyzer.restricted ? "a role that may only read this group's tables" : "the server's own database user"}, on a connection opened for this call and closed after it, in a rolled-back READ ONLY transaction. ` +
          "Unqualified names resolve in this instance's schema; a statement that calls a function, operator or cast off the allowlist or reads a relation outside this schema is refused before PostgreSQL sees it, and its plan is checked again before it runs." +
          (analyze ? ' With analyze the statement was executed to measure it.' : ' The statement was planned, not executed.'),
        plan: result.plan,
      };
    },
  };
}

/** The database use cases both transports call (REST /database/*, MCP tools). */
export type DatabaseService = ReturnType<typeof createDatabaseService>;
