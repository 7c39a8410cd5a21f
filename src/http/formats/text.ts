/**
 * Text clean-up and escaping shared by the XML and HTML formats. Test output
 * (failure reasons, tracebacks, logs) can hold terminal colour codes and
 * control characters; XML 1.0 cannot carry most of them at all (a parser
 * rejects the whole document), and in HTML they are noise.
 */

/** Terminal escape sequences: CSI (colours, cursor moves), OSC (titles, links), two-byte ESC sequences. */
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]/g;

/**
 * Everything XML 1.0's `Char` production excludes: C0 controls but tab, LF
 * and CR; lone surrogates; U+FFFE and U+FFFF.
 */
const NOT_XML_CHAR = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;

/**
 * Removes terminal escape sequences whole, then every character XML 1.0
 * cannot carry. Used for XML and HTML output alike.
 */
export function stripUnsafeChars(s: string): string {
  return s.replace(ANSI, '').replace(NOT_XML_CHAR, '');
}

const XML_TEXT: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '\r': '&#13;' };
const XML_ATTR: Record<string, string> = { ...XML_TEXT, '"': '&quot;', '\t': '&#9;', '\n': '&#10;' };

/** Character data: `&`, `<`, `>` (so `]]>` cannot appear) and CR (a parser would turn CRLF into LF). */
export const xmlText = (s: string): string => stripUnsafeChars(s).replace(/[&<>\r]/g, (c) => XML_TEXT[c]!);

/** A double-quoted attribute value; tab, LF and CR as references because attribute normalisation turns them into spaces. */
export const xmlAttr = (s: string): string => stripUnsafeChars(s).replace(/[&<>"\t\n\r]/g, (c) => XML_ATTR[c]!);

const HTML: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text or a quoted attribute value in HTML. */
export const html = (s: string): string => stripUnsafeChars(s).replace(/[&<>"']/g, (c) => HTML[c]!);
