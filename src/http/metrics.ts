import { createHash, timingSafeEqual } from 'node:crypto';
import type { Express, RequestHandler } from 'express';
import type { Config } from '../config.js';
import type { Metrics } from '../services/metrics.js';
import { createKeyResolver, readKey } from '../transport/auth.js';
import { sendError } from '../transport/errors.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * GET /metrics at the server root (outside the REST base path, where scrapers look): Prometheus'
 * text format, to any key of the group (read-only included) or METRICS_KEY, in the group's key
 * header or as `Authorization: Bearer` (what a scrape config sends).
 */
export function registerMetricsRoute(app: Express, deps: { config: Config; metrics: Metrics }) {
  const { config, metrics } = deps;
  const resolve = createKeyResolver(config);
  // METRICS_KEY's digest, made again once a reload replaced the key.
  let cached: { key: string | undefined; digest: Buffer | undefined } | undefined;
  const metricsKey = () => {
    if (!cached || cached.key !== config.metrics.key) {
      cached = { key: config.metrics.key, digest: config.metrics.key === undefined ? undefined : digest(config.metrics.key) };
    }
    return cached.digest;
  };
  const isMetricsKey = (key: string) => {
    const d = metricsKey();
    return d !== undefined && timingSafeEqual(digest(key), d);
  };
  const production = config.production;

  // Open only when the group needs no key and no METRICS_KEY is set.
  const allowed = (req: Parameters<RequestHandler>[0]): 'ok' | 'missing' | 'invalid' => {
    if (!config.auth.required && metricsKey() === undefined) return 'ok';
    const keys = [readKey(req, config.auth.header), readKey(req, 'authorization')].filter((k): k is string => k !== undefined);
    if (keys.length === 0) return 'missing';
    return keys.some((k) => isMetricsKey(k) || resolve(k) !== undefined) ? 'ok' : 'invalid';
  };

  const handler: RequestHandler = async (req, res) => {
    const verdict = allowed(req);
    if (verdict !== 'ok') {
      sendError(req, res, 401, 'unauthorized', verdict === 'missing' ? 'API key missing' : 'API key invalid', {
        hint: "Send one of the group's keys (API_KEYS or API_KEYS_READONLY) or METRICS_KEY as Authorization: Bearer <key>",
        production,
      });
      return;
    }
    const { contentType, body } = await metrics.render();
    res.setHeader('Cache-Control', 'no-store');
    res.type(contentType).send(body);
  };
  app.get('/metrics', handler);
}
