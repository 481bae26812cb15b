import type { Router } from 'express';
import type { Services } from '../../services/index.js';

/** Keyword, semantic and hybrid search routes (API.md "Search"). */
export function registerSearchRoutes(_router: Router, _services: Services) {}
