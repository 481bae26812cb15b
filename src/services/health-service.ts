import type { BuildInfo } from '../version.js';

export interface HealthReport {
  healthy: boolean;
  schema: string;
  instance: string | null;
  version: string;
  uptime_s: number;
}

/** `/health`: a database round trip bounded by a timeout, so an outage answers 503 within 2 s. */
export function createHealthService(deps: {
  ping: () => Promise<void>;
  schema: string;
  label: string | null;
  buildInfo: BuildInfo;
  timeoutMs?: number;
}) {
  const started = Date.now();
  const timeoutMs = deps.timeoutMs ?? 1500;
  return {
    async check(): Promise<HealthReport> {
      let timer: NodeJS.Timeout | undefined;
      const healthy = await Promise.race([
        deps.ping().then(() => true, () => false),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), timeoutMs);
        }),
      ]);
      clearTimeout(timer);
      return {
        healthy,
        schema: deps.schema,
        instance: deps.label,
        version: deps.buildInfo.version,
        uptime_s: Math.round((Date.now() - started) / 1000),
      };
    },
  };
}

export type HealthService = ReturnType<typeof createHealthService>;

/** The body both transports answer with (REST adds `success`); never the server version or host. */
export function healthBody(h: HealthReport) {
  return {
    status: h.healthy ? ('healthy' as const) : ('unhealthy' as const),
    database: h.healthy ? ('connected' as const) : ('error' as const),
    schema: h.schema,
    instance: h.instance,
    version: h.version,
    uptime_s: h.uptime_s,
  };
}
