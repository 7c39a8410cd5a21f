/** Reservation messages as HTML (`message_html`): Markdown by marked, with raw HTML shown as text. */
import { Marked, type Tokens } from 'marked';

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c);

/** Links and images keep only http(s), mailto and plain relative targets; `javascript:` and the like become text. */
const safeUrl = (href: string) => /^(https?:|mailto:)/i.test(href) || !/[:&\\\s]/.test(href);

/**
 * Markdown with raw HTML shown as text: a `<script>` in a message comes out
 * as `&lt;script&gt;`, never as markup another user's browser would run.
 */
const markdown = new Marked({
  gfm: true,
  async: false,
  renderer: {
    html(token: Tokens.HTML | Tokens.Tag) {
      const text = escapeHtml(token.text);
      return 'block' in token && token.block ? `<p>${text}</p>\n` : text;
    },
    link(token: Tokens.Link) {
      return safeUrl(token.href) ? false : this.parser.parseInline(token.tokens);
    },
    image(token: Tokens.Image) {
      return safeUrl(token.href) ? false : escapeHtml(token.text);
    },
  },
});

/** A reservation message as HTML (`message_html`). */
export const renderMarkdown = (message: string): string => markdown.parse(message, { async: false });

/** One line of Markdown (a summary) as inline HTML, under the same rules (raw HTML shown as text). */
export const renderMarkdownInline = (text: string): string => markdown.parseInline(text, { async: false });
