#!/usr/bin/env node
// `npx vcon-launch` finds this through node_modules/.bin. The bins live in this small linked
// package, not in the root package.json: npm exec installs a root package that names the bin
// into its own cache and runs `prepare` (a second build) before running it.
import '../dist/cli/index.js';
