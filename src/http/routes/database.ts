import type { Router } from 'express';
import type { Services } from '../../services/index.js';

/** Database introspection and analytics routes (API.md "Database and analytics"). */
export function registerDatabaseRoutes(_router: Router, _services: Services) {}
