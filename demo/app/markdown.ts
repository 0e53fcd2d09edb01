/**
 * Markdown for model replies, rendered safely: `marked` turns the text into
 * HTML and DOMPurify strips everything that could run (script, event
 * handlers, `javascript:` URLs, forms, iframes) before it reaches the page.
 * Links open in a new tab without access to this one. Raw HTML in a reply
 * is shown as text, never interpreted.
 */
import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    // A model's raw HTML is data to show, not markup to trust.
    html: ({ text }) => escapeHtml(text),
  },
});

const purifier = DOMPurify(window);
purifier.addHook('afterSanitizeAttributes', (node) => {
  if (node instanceof HTMLAnchorElement) {
    node.target = '_blank';
    node.rel = 'noopener noreferrer';
  }
});

const ALLOWED_TAGS = ['a', 'p', 'br', 'strong', 'em', 'del', 'code', 'pre', 'ul', 'ol', 'li', 'blockquote', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'input'];

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

/** Renders `text` as Markdown into `target`, replacing its children. */
export function renderMarkdown(target: HTMLElement, text: string): void {
  const html = marked.parse(text) as string;
  const clean = purifier.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR: ['href', 'title', 'type', 'checked', 'disabled', 'start', 'align'],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
    RETURN_DOM_FRAGMENT: true,
  });
  target.replaceChildren(clean);
}
