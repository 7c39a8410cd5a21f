// message_html: "The message converted from Markdown to HTML" by marked, with raw
// HTML and script-bearing link targets shown as text, never as live markup.
import { expect } from 'chai';
import { renderMarkdown } from '../../src/http/markdown.js';
import { presentReservation } from '../../src/http/presenters.js';
import { ReservationService } from '../../src/core/reservations.js';

describe('reservations: message_html', () => {
  it('renders Markdown: emphasis, code, lists, links', () => {
    expect(renderMarkdown('Soak run, **do not touch**')).to.equal('<p>Soak run, <strong>do not touch</strong></p>\n');
    expect(renderMarkdown('`make test`')).to.equal('<p><code>make test</code></p>\n');
    expect(renderMarkdown('- a\n- b')).to.equal('<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n');
    expect(renderMarkdown('see [ticket](https://example.com/T-1?a=1&b=2)')).to.equal(
      '<p>see <a href="https://example.com/T-1?a=1&amp;b=2">ticket</a></p>\n',
    );
  });

  it('escapes a raw <script> block: it comes out as text', () => {
    const html = renderMarkdown('<script>alert(1)</script>');
    expect(html).to.equal('<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n');
    expect(html).not.to.contain('<script');
  });

  it('escapes inline HTML tags and their attributes', () => {
    expect(renderMarkdown('a <b onclick="x()">bold</b> <img src=x onerror=alert(1)>')).to.equal(
      '<p>a &lt;b onclick=&quot;x()&quot;&gt;bold&lt;/b&gt; &lt;img src=x onerror=alert(1)&gt;</p>\n',
    );
    expect(renderMarkdown('<!-- hidden -->')).to.equal('<p>&lt;!-- hidden --&gt;</p>\n');
  });

  const scripted = [
    '[x](javascript:alert(1))',
    '[x](JavaScript:alert(1))',
    '[x](jav&#x61;script:alert(1))',
    '[x](<javascript:alert(1)>)',
    '<javascript:alert(1)>',
    '[x]: javascript:alert(1)\n\n[x]',
    '![x](data:image/svg+xml;base64,PHN2Zz4=)',
  ];
  for (const md of scripted) {
    it(`drops the link target of ${JSON.stringify(md)} and keeps its text`, () => {
      const html = renderMarkdown(md);
      expect(html).not.to.match(/href|src=/);
      expect(html).to.match(/^<p>(x|javascript:alert\(1\))<\/p>\n$/);
    });
  }

  it('keeps relative and mailto links', () => {
    expect(renderMarkdown('[r](/app/results/x) [m](mailto:a@example.com)')).to.equal(
      '<p><a href="/app/results/x">r</a> <a href="mailto:a@example.com">m</a></p>\n',
    );
  });

  it('the Reservation object (http/presenters.ts) carries the rendered message', async () => {
    const svc = new ReservationService({
      store: { load: () => ({ last_reservation_id: 0, reservations: [] }), save: async () => {} },
      knownNodes: () => ['n1'],
      isBusy: () => false,
    });
    const [r] = await svc.reserve('alice', { node_ids: ['n1'], message: '*hi* <script>x</script>' });
    expect(r!.message).to.equal('*hi* <script>x</script>');
    expect(presentReservation(r!, 'alice').message_html).to.equal('<p><em>hi</em> &lt;script&gt;x&lt;/script&gt;</p>\n');
  });
});
