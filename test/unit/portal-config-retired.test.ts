/**
 * A retired key of the portal's config still loads (docs/farm.md, "Forwarded requests: HTTP/2 over the WebSocket"):
 * `max_buffered_response_bytes` (the link's multiplexer, protocol 2) is accepted and ignored, so a portal upgraded to
 * protocol 3 starts with its old config file; the portal warns once at start (src/farm/portal/portal.ts).
 */
import { expect } from 'chai';
import { parsePortalConfig } from '../../src/farm/portal/config.js';

describe('portal config: retired keys', () => {
  it('loads a config that still sets max_buffered_response_bytes, and still refuses an unknown key', () => {
    const base = { database: 'postgresql:///farm', storage_dir: '/var/lib/farmhand-portal' };
    const cfg = parsePortalConfig({ ...base, max_buffered_response_bytes: 64 * 1024 * 1024 });
    expect(cfg.storage_dir).to.equal('/var/lib/farmhand-portal');
    expect(() => parsePortalConfig({ ...base, max_bufered_response_bytes: 1 })).to.throw(/max_bufered_response_bytes/);
  });
});
