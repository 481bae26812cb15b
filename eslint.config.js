// Lint rules, including the import boundaries of docs/architecture.md ("What may import what").
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const restrict = (patterns) => ({ 'no-restricted-imports': ['error', { patterns }] });

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.vcon/**', 'coverage/**', 'tests/bench/results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  { files: ['src/**/*.ts'], rules: { 'no-console': 'error' } },
  {
    files: ['src/domain/**/*.ts'],
    rules: restrict([
      {
        group: [
          'express',
          '@modelcontextprotocol/*',
          'postgres',
          'pino',
          '../db/*',
          '../services/*',
          '../http/*',
          '../mcp/*',
          '../search/*',
          'postal-mime',
          'html-to-text',
        ],
        message: 'domain imports only zod',
      },
    ]),
  },
  {
    // The search engine's pure parts (units, tsvector, e-mail text): no transport, driver or service.
    files: ['src/search/**/*.ts'],
    rules: restrict([
      {
        group: ['express', '@modelcontextprotocol/*', 'postgres', 'pino', '../db/*', '../services/*', '../http/*', '../mcp/*', '../transport/*'],
        message: 'src/search imports the domain and libraries only',
      },
    ]),
  },
  {
    files: ['src/services/**/*.ts'],
    rules: restrict([
      { group: ['express', '@modelcontextprotocol/*', 'postgres'], message: 'services must not import transports or the database driver' },
      { group: ['../http/*', '../mcp/*'], message: 'services must not import transports' },
      { group: ['../db/*'], message: 'services use repo interfaces (import type only)', allowTypeImports: true },
    ]),
  },
  {
    files: ['src/http/**/*.ts', 'src/mcp/**/*.ts', 'src/transport/**/*.ts'],
    rules: restrict([{ group: ['postgres', '**/db/*', '**/db/**'], message: 'transports call services, never the database' }]),
  },
  {
    // What both transports share (auth, CORS, the error mapping) lives in src/transport, by name.
    files: ['src/mcp/**/*.ts'],
    rules: restrict([
      { group: ['postgres', '**/db/*', '**/db/**'], message: 'transports call services, never the database' },
      { group: ['../http/*', '**/src/http/**'], message: 'MCP does not reach into REST: share through src/transport' },
    ]),
  },
  {
    files: ['src/transport/**/*.ts'],
    rules: restrict([
      { group: ['postgres', '**/db/*', '**/db/**'], message: 'transports call services, never the database' },
      { group: ['../http/*', '../mcp/*'], message: 'src/transport is shared by both transports and imports neither' },
    ]),
  },
  {
    files: ['cli/**/*.ts'],
    rules: restrict([
      {
        group: ['**/src/http/**', '**/src/mcp/**', '**/src/services/**'],
        message: 'the launcher uses config and the migration runner, not the server internals',
      },
      { group: ['postgres'], message: 'the launcher supervises; SQL lives in src/db (roles.ts, migrate.ts)' },
    ]),
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', setTimeout: 'readonly', globalThis: 'readonly' } },
  },
);
