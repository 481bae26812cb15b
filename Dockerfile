# The vcon-server image: one group per container, configured by its environment (the Secret and
# env of `vcon-launch export`). Built where a container daemon runs: `docker build -t vcon-launch:0.1.0 .`
# (the development machines of this project have none; docs/deployment.md).

# Build stage: the full install applies patches/ (patch-package), compiles TypeScript and builds the
# word-vector cache (.vcon/embeddings), which the runtime stage copies.
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY . .
RUN npm ci --no-audit --no-fund

FROM node:22-bookworm-slim
ENV NODE_ENV=production \
    MCP_TRANSPORT=http \
    MCP_HTTP_HOST=0.0.0.0 \
    MCP_HTTP_PORT=3000
WORKDIR /app
COPY package.json package-lock.json ./
# The bins' linked package (a file: dependency of package.json), which npm ci links.
COPY bin ./bin/
COPY patches ./patches/
# Runtime dependencies only; scripts are skipped (prepare compiles) and the driver patches are
# applied by hand, since the server refuses an unpatched postgres.js.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npx patch-package --error-on-fail --error-on-warn \
 && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY --from=build /app/.vcon/embeddings ./.vcon/embeddings
COPY env/example.env ./env/example.env
RUN chmod +x dist/src/main.js dist/cli/index.js \
 && ln -s /app/dist/src/main.js /usr/local/bin/vcon-server \
 && ln -s /app/dist/cli/index.js /usr/local/bin/vcon-launch \
 && chown -R node:node /app/.vcon
# The node image's unprivileged user (uid 1000, what the exported Deployment runs as).
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "const b = process.env.REST_API_BASE_PATH ?? '/api/v1'; fetch('http://127.0.0.1:' + (process.env.MCP_HTTP_PORT || 3000) + b.replace(/\\/+$/, '') + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["vcon-server"]
