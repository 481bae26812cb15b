// Flags shared by several commands, so every command spells them the same way.
import type { Command } from 'commander';

const collect = (value: string, previous: string[] = []) => [...previous, value];

export interface GroupFlags {
  group?: string[];
  all?: boolean;
  envDir: string;
}

/** --group NAME (repeatable), --all, --env-dir DIR. */
export function addGroupFlags(cmd: Command, opts: { all?: boolean } = {}): Command {
  cmd.option('--group <name>', 'a group (env/NAME.env); repeat for several', collect);
  if (opts.all !== false) cmd.option('--all', 'every group defined in the env directory');
  return addEnvDirFlag(cmd);
}

/** --env-dir DIR (default env/ under the current directory). */
export function addEnvDirFlag(cmd: Command): Command {
  return cmd.option('--env-dir <dir>', 'directory of the group env files', 'env');
}

/** --instances-dir DIR (default instances/ under the current directory). */
export function addInstancesDirFlag(cmd: Command): Command {
  return cmd.option('--instances-dir <dir>', 'directory of the running-instances registry', 'instances');
}
