#!/usr/bin/env node
// `npx vcon-server`, resolved through node_modules/.bin like vcon-launch.js (see there why).
import { runMain } from '../dist/src/main.js';

void runMain();
