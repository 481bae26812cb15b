// The /health bound, on a fake clock: a database that never answers is reported unhealthy once the
// check's timeout passes, not when the client gives up (the real outage is tests/integration/health.test.ts).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createAdmission } from '../../src/services/admission.js';
import { createHealthService } from '../../src/services/health-service.js';
import { createBodyBudget } from '../../src/services/body-budget.js';

const buildInfo = { version: '0.0.0-test', gitCommit: 'test', buildTime: 'test' };

describe('health check timeout', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('answers unhealthy after its timeout when the ping never returns', async () => {
    const admission = createAdmission({ limit: 2, maxWaitMs: 1000 });
    const health = createHealthService({
      ping: () => new Promise<never>(() => {}),
      admission,
      bodies: createBodyBudget(1),
      schema: 's',
      label: null,
      buildInfo,
    });
    let report: Awaited<ReturnType<typeof health.check>> | undefined;
    void health.check().then((r) => (report = r));
    await vi.advanceTimersByTimeAsync(1499);
    expect(report).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(report).toMatchObject({ state: 'unhealthy', healthy: false });
  });

  it('answers at once when the ping fails at once', async () => {
    const admission = createAdmission({ limit: 2, maxWaitMs: 1000 });
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const health = createHealthService({
      ping: () => Promise.reject(refused),
      admission,
      bodies: createBodyBudget(1),
      schema: 's',
      label: null,
      buildInfo,
    });
    await expect(health.check()).resolves.toMatchObject({ state: 'unhealthy' });
  });
});
