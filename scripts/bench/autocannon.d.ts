// autocannon ships no types; the bench uses only this part of its API.
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';
  interface Result {
    duration: number;
    errors: number;
    timeouts: number;
  }
  type Instance = EventEmitter & PromiseLike<Result>;
  const autocannon: (opts: Record<string, unknown>) => Instance;
  export default autocannon;
}
