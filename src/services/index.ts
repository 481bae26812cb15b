import type { Plugin } from '../plugins/hooks.js';
import type { HealthService } from './health-service.js';
import type { VconService } from './vcon-service.js';
import type { TagService } from './tag-service.js';
import type { DiscoveryService } from './discovery-service.js';
import type { MetaService } from './meta-service.js';

/** Every use case of one instance, as both transports see them. Wired in src/main.ts. */
export interface Services {
  health: HealthService;
  vcons: VconService;
  tags: TagService;
  discovery: DiscoveryService;
  meta: MetaService;
  plugins: readonly Plugin[];
  // Added by the search issue (#5): search: SearchService  (content / semantic / hybrid)
  // Added by the database issue (#7): database: DatabaseService, analytics: AnalyticsService
}
