import type { Plugin } from '../plugins/hooks.js';
import type { HealthService } from './health-service.js';
import type { VconService } from './vcon-service.js';
import type { TagService } from './tag-service.js';
import type { DiscoveryService } from './discovery-service.js';
import type { MetaService } from './meta-service.js';
import type { DatabaseService } from './database-service.js';
import type { AnalyticsService } from './analytics-service.js';

/** Every use case of one instance, as both transports see them. Wired in src/main.ts. */
export interface Services {
  health: HealthService;
  vcons: VconService;
  tags: TagService;
  discovery: DiscoveryService;
  meta: MetaService;
  plugins: readonly Plugin[];
  // Added by the search issue (#5): search: SearchService  (content / semantic / hybrid)
  database: DatabaseService;
  analytics: AnalyticsService;
}
