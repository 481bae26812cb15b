// Passwords of the roles the launcher made for each group: one file per group under
// <instances>/credentials/, mode 0600 in a 0700 directory, next to the registry.
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';

export interface GroupCredentials {
  /** The schema the roles were made for: a group that changes schema gets new roles. */
  schema: string;
  role: string;
  password: string;
  analyze_role: string;
  analyze_password: string;
}

export interface CredentialStore {
  dir: string;
  get(group: string): GroupCredentials | undefined;
  save(group: string, creds: GroupCredentials): void;
}

/** A new random password (hex: safe in URLs and env files). */
export const newPassword = () => randomBytes(24).toString('hex');

export function createCredentialStore(instancesDir: string): CredentialStore {
  const dir = path.join(instancesDir, 'credentials');
  const fileOf = (group: string) => path.join(dir, `${group}.json`);
  return {
    dir,
    get(group) {
      try {
        return JSON.parse(readFileSync(fileOf(group), 'utf8')) as GroupCredentials;
      } catch {
        return undefined;
      }
    },
    save(group, creds) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      chmodSync(dir, 0o700);
      const tmp = `${fileOf(group)}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify(creds, null, 2) + '\n', { mode: 0o600 });
      renameSync(tmp, fileOf(group));
    },
  };
}
