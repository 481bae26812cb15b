import type { Request, RequestHandler, Router } from 'express';
import { AnalysisQuery, AttachmentsQuery, GetVconQuery, parseParams, parseUuid, WriteQuery } from '../../domain/params.js';
import { withWarnings } from '../../domain/vcon.js';
import type { Services } from '../../services/index.js';
import type { SubResource, WriteOptions } from '../../services/vcon-service.js';
import { ctxOf, methodNotAllowed, queryOf } from './util.js';

/** `?wait_for=search`: the answer comes after the written vCons are indexed. */
const writeOptions = (req: Request): WriteOptions => ({ waitFor: parseParams(WriteQuery, queryOf(req)).wait_for });

/** vCon CRUD, batch, listing and sub-resources (docs/api.md "vCons"); thin over the vCon service. */
export function registerVconRoutes(router: Router, services: Services) {
  const { vcons } = services;

  /** POST of one dialog, analysis or attachment: 201 with the index it was stored at. */
  const append =
    (section: SubResource, item: 'dialog' | 'analysis' | 'attachment'): RequestHandler =>
    async (req, res) => {
      const r = await vcons.append(parseUuid(req.params.uuid), section, req.body, ctxOf(req, res));
      res.status(201).json({ success: true, uuid: r.uuid, index: r.index, [item]: r.item, ...withWarnings(r.warnings) });
    };

  router
    .route('/vcons')
    .get(async (req, res) => {
      res.json({ success: true, ...(await vcons.list(queryOf(req), ctxOf(req, res))) });
    })
    .post(async (req, res) => {
      const r = await vcons.create(req.body, ctxOf(req, res), writeOptions(req));
      res.status(r.created ? 201 : 200).json({ success: true, uuid: r.uuid, created: r.created, ...withWarnings(r.warnings) });
    })
    .all(methodNotAllowed);

  router
    .route('/vcons/batch')
    .post(async (req, res) => {
      const r = await vcons.batch(req.body, ctxOf(req, res), writeOptions(req));
      const stored = r.created + r.updated;
      if (stored === 0) {
        // Nothing stored: still the batch report, but also a proper error body (one error format).
        res.status(400).json({
          ...r,
          error: 'validation_failed',
          message: `No vCon was stored: all ${r.total} item(s) failed validation (see results)`,
          request_id: String(res.getHeader('X-Request-Id') ?? ''),
        });
        return;
      }
      res.status(r.failed === 0 ? 201 : 207).json(r);
    })
    .all(methodNotAllowed);

  router
    .route('/vcons/:uuid')
    .get(async (req, res) => {
      const { format } = parseParams(GetVconQuery, queryOf(req));
      const uuid = parseUuid(req.params.uuid);
      const text = format === 'full' ? await vcons.getText(uuid) : undefined;
      if (text !== undefined) {
        // Straight to node: express's send turns a string over 1,000 characters into a Buffer (a
        // copy of the document) and writes headers and body as two chunks. No ETag is made here,
        // so send has nothing else to do; node drops the body of a HEAD itself.
        const body = `{"success":true,"vcon":${text}}`;
        res.setHeader('Content-Type', 'application/json; charset=utf-8');
        res.setHeader('Content-Length', Buffer.byteLength(body));
        res.end(body);
        return;
      }
      res.json({ success: true, vcon: await vcons.get(uuid, format, ctxOf(req, res)) });
    })
    .patch(async (req, res) => {
      res.json({ success: true, vcon: await vcons.update(parseUuid(req.params.uuid), req.body, ctxOf(req, res), writeOptions(req)) });
    })
    .delete(async (req, res) => {
      res.json({ success: true, ...(await vcons.remove(parseUuid(req.params.uuid), ctxOf(req, res))) });
    })
    .all(methodNotAllowed);

  router.route('/vcons/:uuid/dialog').post(append('dialog', 'dialog')).all(methodNotAllowed);

  router
    .route('/vcons/:uuid/analysis')
    .get(async (req, res) => {
      const uuid = parseUuid(req.params.uuid);
      const analysis = await vcons.getAnalysis(uuid, parseParams(AnalysisQuery, queryOf(req)).type, ctxOf(req, res));
      res.json({ success: true, uuid, count: analysis.length, analysis });
    })
    .post(append('analysis', 'analysis'))
    .all(methodNotAllowed);

  router
    .route('/vcons/:uuid/attachments')
    .get(async (req, res) => {
      const uuid = parseUuid(req.params.uuid);
      const attachments = await vcons.getAttachments(uuid, parseParams(AttachmentsQuery, queryOf(req)), ctxOf(req, res));
      res.json({ success: true, uuid, count: attachments.length, attachments });
    })
    .post(append('attachments', 'attachment'))
    .all(methodNotAllowed);
}
