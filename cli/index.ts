#!/usr/bin/env node
// vcon-launch: runs one isolated vcon-server per group. Each command lives in cli/commands/.
import { Command, CommanderError } from 'commander';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../src/paths.js';
import { UserError } from './errors.js';
import { registerStart } from './commands/start.js';
import { registerStatus } from './commands/status.js';
import { registerStop } from './commands/stop.js';
import { registerMigrate } from './commands/migrate.js';
import { registerProvision } from './commands/provision.js';
import { registerImport } from './commands/import.js';
import { registerCheck } from './commands/check.js';
import { registerRotate } from './commands/rotate.js';
import { registerReload } from './commands/reload.js';
import { registerExport } from './commands/export.js';
import { registerRemove } from './commands/remove.js';
import { runSupervisor } from './daemon.js';
import { readLauncherEnvironment } from './environment.js';
import { resolveDir } from './groups.js';
import { registerDump } from './commands/dump.js';

const readVersion = () => (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;

/** Builds the program with every command registered. */
export function buildProgram(): Command {
  const program = new Command('vcon-launch')
    .description('Run one isolated vCon server (REST + MCP) per group, each in its own PostgreSQL schema')
    .version(readVersion())
    .showHelpAfterError('(run with --help for usage)');
  registerStart(program);
  registerStatus(program);
  registerStop(program);
  registerMigrate(program);
  registerProvision(program);
  registerImport(program);
  registerCheck(program);
  registerRotate(program);
  registerReload(program);
  registerExport(program);
  registerRemove(program);
  program
    .command('supervise', { hidden: true })
    .description('the background supervisor `start --detach` leaves behind (not run by hand)')
    .requiredOption('--instances-dir <dir>', 'directory of the running-instances registry')
    .action(async (opts: { instancesDir: string }) => {
      await runSupervisor(resolveDir(opts.instancesDir), readLauncherEnvironment());
    });
  registerDump(program);
  return program;
}

/**
 * A reader that stops early (`status --json | head -c 100`) closes the pipe: that is the reader's
 * choice, not an error of ours. Leave quietly, on stdout and stderr alike, in every command.
 */
function leaveQuietlyOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw err;
    });
  }
}

async function main(): Promise<void> {
  leaveQuietlyOnClosedPipe();
  try {
    await buildProgram().parseAsync();
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode;
    } else if (err instanceof UserError) {
      process.stderr.write(`vcon-launch: ${err.message}\n`);
      process.exitCode = err.exitCode;
    } else {
      process.stderr.write(`vcon-launch: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
      process.exitCode = 1;
    }
  }
}

void main();
