/**
 * The one forward of a client's request to a node over its connection to this portal (FarmHub.forward), used by
 * every router that passes a request on (routes.ts, src/farm/resultRoutes.ts): which of the client's headers go to
 * the node, who the node is told the caller is (nodeAnswer.ts: nobody for a page), the portal's base URL, the
 * client going away cancelling the request at the node, and the node's answer handed back through the one header
 * policy (nodeAnswer.ts setNodeAnswerHeaders). The request of a node held by another replica takes the same request
 * headers to that replica (replicaProxy.ts), and its answer the same header policy.
 */
import type { Context } from 'koa';
import { CLIENT_ADDRESS_HEADER } from '../../http/delegateHeaders.js';
import type { FarmHub, ForwardRequest, ForwardResponse } from '../contract.js';
import { forwardedUser, pageHeaders, setNodeAnswerHeaders } from './nodeAnswer.js';

/**
 * Request headers passed on (the rest describe the client's hop to the portal, or the person: never her cookie,
 * token or CSRF token).
 */
const PASSED_REQUEST_HEADERS = ['content-type', 'accept', 'range', 'if-none-match', 'if-modified-since', 'last-event-id'];

/** The client's headers that are passed on, to a node or to another replica. */
export function passedRequestHeaders(ctx: Context): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const h of PASSED_REQUEST_HEADERS) {
    const v = ctx.get(h);
    if (v) headers[h] = v;
  }
  return headers;
}

export function portalBaseUrl(ctx: Context, publicUrl?: string): string {
  return (publicUrl ?? `${ctx.protocol}://${ctx.host}`).replace(/\/+$/, '');
}

/** The request as the node gets it: passed headers, the caller's address, the user (nobody for a page), the base URL. */
export function nodeRequest(ctx: Context, publicUrl: string | undefined, body?: Buffer): ForwardRequest {
  const headers = passedRequestHeaders(ctx);
  if (body !== undefined) headers['content-type'] = 'application/json';
  // Who called, for the node's audit trail (believed by the node only with the link's delegate secret).
  const from = ctx.request.socket.remoteAddress;
  if (from) headers[CLIENT_ADDRESS_HEADER] = from;
  // A page is rendered by the node for nobody it is told of: the node learns only whether the reader is signed
  // in on the portal (pageHeaders), never who, her session or its CSRF token (nodeAnswer.ts).
  return { method: ctx.method, path: ctx.url, headers: pageHeaders(ctx, headers), ...(body !== undefined && { body }), user: forwardedUser(ctx), baseUrl: portalBaseUrl(ctx, publicUrl) };
}

/** Forward `ctx`'s request to the node; the client going away (before its answer is written) cancels it there. */
export async function forwardToNode(hub: Pick<FarmHub, 'forward'>, ctx: Context, nodeId: string, publicUrl: string | undefined, body?: Buffer): Promise<ForwardResponse> {
  const ac = new AbortController();
  const onClose = () => {
    if (!ctx.res.writableFinished) ac.abort();
  };
  ctx.res.once('close', onClose);
  try {
    return await hub.forward(nodeId, nodeRequest(ctx, publicUrl, body), ac.signal);
  } catch (e) {
    ctx.res.off('close', onClose);
    throw e;
  }
}

/** Answer `ctx` with a node's answer, streamed (the header policy of nodeAnswer.ts). */
export function answerWith(ctx: Context, res: ForwardResponse, publicUrl: string | undefined): void {
  setNodeAnswerHeaders(ctx, res.status, res.headers, publicUrl);
  if (res.status === 204 || res.status === 304 || ctx.method === 'HEAD') {
    res.body.resume();
    return;
  }
  const length = ctx.response.get('Content-Length');
  ctx.body = res.body;
  if (length) ctx.set('Content-Length', length);
}
