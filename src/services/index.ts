import type { Plugin } from '../plugins/hooks.js';
import type { HealthService } from './health-service.js';
import type { VconService } from './vcon-service.js';
import type { TagService } from './tag-service.js';
import type { DiscoveryService } from './discovery-service.js';
import type { MetaService } from './meta-service.js';
import type { SearchService } from './search-service.js';
import type { DatabaseService } from './database-service.js';
import type { AnalyticsService } from './analytics-service.js';
import type { Admission } from './admission.js';
import type { BodyBudget } from './body-budget.js';
import type { ChangeService } from './change-service.js';
import type { WebhookService } from './webhook-service.js';

/** Every use case of one instance, as both transports see them. Wired in src/main.ts. */
export interface Services {
  health: HealthService;
  vcons: VconService;
  tags: TagService;
  discovery: DiscoveryService;
  meta: MetaService;
  search: SearchService;
  plugins: readonly Plugin[];
  database: DatabaseService;
  analytics: AnalyticsService;
  /** The group's change log: pages and streams of what was written. */
  changes: ChangeService;
  /** Deliveries of the change log to WEBHOOK_URLS. */
  webhooks: WebhookService;
  /** Turns of the database pool: bounded wait, then database_busy. */
  admission: Admission;
  /** Bytes of request bodies read at once (BODY_IN_FLIGHT_LIMIT): beyond it, server_busy. */
  bodies: BodyBudget;
  /** Stops the background work (the embedding worker of a remote provider, change log pruning, streams); the pool stays open. */
  stop(): Promise<void>;
}
