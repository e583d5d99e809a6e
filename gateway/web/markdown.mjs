// Model text to HTML, on well-kept libraries from Debian's packages (embedded
// by gateway/web/assets.cmake, loaded by index.html as classic scripts that
// set globals): marked (Markdown, GitHub's tables and strikethrough),
// highlight.js (code blocks), KaTeX (math) and DOMPurify (the last word on
// what HTML may reach the page). This file only configures them.
//
// Model text is untrusted. Two layers keep it from becoming markup:
//   1. marked never sees HTML: its HTML tokenizers are turned off, so "<b>"
//      is text like any other; links and images are links only for http(s)
//      URLs (else their source shows as text), images become links (the
//      page loads nothing from elsewhere), task-list boxes are characters.
//   2. DOMPurify then keeps only the tags and attributes this renderer makes.
//
// Math, as K3 writes it: $...$ and \(...\) inline, $$...$$ and \[...\] set
// apart (on lines of their own, or inline). A $ opens math only before a
// non-space and closes it only after one and not before a digit (Pandoc's
// rule), so "$5 and $10" stays text; \$ is a dollar sign. The TeX goes into a
// placeholder as text; enhance() renders it with KaTeX into the page's DOM
// (katex.render builds nodes and sets styles through the DOM, which the
// page's CSP allows where an inline style="" would be refused), with
// trust: false (no \href, \url, \includegraphics or \html*).
//
// enhance() also gives each code block a Copy button (the clipboard, or a
// hidden textarea where the page is not a secure context).

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

// Text safe inside an element or a double-quoted attribute.
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

// The URL to put in an href, or null: http(s) only, absolute, no spaces or
// control characters (which browsers strip, letting "java\tscript:" through).
export function safeUrl(raw) {
  const s = String(raw);
  if (!/^https?:\/\/[^\s]/i.test(s) || /[\u0000-\u0020\u007f-\u009f]/.test(s)) return null;
  let url;
  try {
    url = new URL(s);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  return url.href;
}

// What the sanitiser lets through: everything the renderer below makes, and
// no more (highlight.js's and the math placeholders' are spans with a class).
export const ALLOWED_TAGS = ['p', 'br', 'em', 'strong', 'del', 'code', 'pre', 'ul', 'ol', 'li',
  'a', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'hr', 'table', 'thead', 'tbody', 'tr',
  'th', 'td', 'span', 'div'];
export const ALLOWED_ATTR = ['href', 'class', 'start', 'align'];
const ALLOWED_VALUE = /^(?:https?:|[^a-z]|[a-z+.-]+(?:[^a-z+.:-]|$))/i;
const LINK_REL = 'noopener noreferrer nofollow';
// Code blocks longer than this are shown unhighlighted: highlight.js's
// grammars are regular expressions, and a reply may be long.
const HIGHLIGHT_MAX_CHARS = 20000;

// ---- math ----

// Each: the pattern where a formula may start (its TeX in group 1), and
// whether it is set apart. A formula is at most 8,000 characters, so that
// many unclosed "\(" in a long reply cost a bounded scan each.
const INLINE_MATH = [
  { re: /^\$\$(?!\$)([^$]{1,8000}?)\$\$/, display: true },
  { re: /^\$(?![\s$])((?:\\[^\n]|[^\\$\n]){1,8000}?)(?<![\s\\])\$(?!\d)/, display: false },
  { re: /^\\\(([\s\S]{1,8000}?)\\\)/, display: false },
  { re: /^\\\[([\s\S]{1,8000}?)\\\]/, display: true },
];
const BLOCK_MATH = [
  /^ {0,3}\$\$([\s\S]{1,8000}?)\$\$[ \t]*(?:\n+|$)/,
  /^ {0,3}\\\[([\s\S]{1,8000}?)\\\][ \t]*(?:\n+|$)/,
];

// marked extensions: math tokens; their HTML is a placeholder holding the TeX as text.
export const mathExtensions = [
  {
    name: 'mathBlock',
    level: 'block',
    start(src) {
      return src.match(/^ {0,3}(?:\$\$|\\\[)/m)?.index;
    },
    tokenizer(src) {
      for (const re of BLOCK_MATH) {
        const m = re.exec(src);
        if (m && m[1].trim() !== '') return { type: 'mathBlock', raw: m[0], tex: m[1].trim() };
      }
      return undefined;
    },
    renderer(token) {
      return `<div class="math-display">${escapeHtml(token.tex)}</div>\n`;
    },
  },
  {
    name: 'mathInline',
    level: 'inline',
    start(src) {
      return src.match(/\$|\\[([]/)?.index;
    },
    tokenizer(src) {
      for (const { re, display } of INLINE_MATH) {
        const m = re.exec(src);
        if (m && m[1].trim() !== '') return { type: 'mathInline', raw: m[0], tex: m[1].trim(), display };
      }
      return undefined;
    },
    renderer(token) {
      const cls = token.display ? 'math-display' : 'math-inline';
      return `<span class="${cls}">${escapeHtml(token.tex)}</span>`;
    },
  },
];

// ---- the renderer ----

function linkHtml(href, innerHtml) {
  return `<a href="${escapeHtml(href)}">${innerHtml}</a>`;
}

// marked's options and overrides (marked 4's Renderer signatures).
function markedOptions(hljs) {
  return {
    gfm: true,
    breaks: true,  // a single newline is a line break, as models mean it
    headerIds: false,  // no id="..." for model text to clash with the page's
    mangle: false,
    extensions: mathExtensions,
    tokenizer: {
      // No HTML: a tag is text (returning undefined skips the tokenizer).
      html() {
        return undefined;
      },
      tag() {
        return undefined;
      },
    },
    renderer: {
      code(code, infostring) {
        const lang = String(infostring ?? '').trim().split(/\s+/)[0];
        const known = /^[A-Za-z0-9_+#.-]{1,32}$/.test(lang) && hljs?.getLanguage(lang);
        const body = code.replace(/\n$/, '');
        const cls = known ? ` class="hljs language-${escapeHtml(lang)}"` : '';
        let html = escapeHtml(body);
        if (known && body.length <= HIGHLIGHT_MAX_CHARS) {
          try {
            html = hljs.highlight(lang, body, true).value;
          } catch {
            // A grammar that fails: shown unhighlighted.
          }
        }
        return `<pre><code${cls}>${html}</code></pre>\n`;
      },
      // A link to anything but http(s) shows its source as text
      // ("[x](javascript:...)", "<javascript:...>"), an e-mail address found
      // in the text just the address. (Here rather than in walkTokens, whose
      // results marked 4 gathers in quadratic time.)
      link(href, title, text) {
        const url = safeUrl(href);
        if (url !== null) return linkHtml(url, text);
        if (String(href) === `mailto:${text}`) return text;
        if (escapeHtml(href) === text) return `&lt;${text}&gt;`;
        return `[${text}](${escapeHtml(href)})`;
      },
      image(href, title, text) {
        const url = safeUrl(href);
        if (url === null) return text;
        return linkHtml(url, text === '' ? escapeHtml(url) : text);
      },
      checkbox(checked) {
        return checked ? '\u2611 ' : '\u2610 ';
      },
    },
  };
}

// A renderer over `libs`: {marked, DOMPurify, hljs, katex} (in the page, the
// globals the libraries' scripts set: see pageRenderer()); marked is
// required, the others are used where given (the node tests run without a
// DOM). It configures marked and DOMPurify, whose settings are global.
export class MarkdownRenderer {
  constructor({ marked, DOMPurify, hljs, katex }) {
    if (!marked?.marked) throw new Error('marked is not loaded (/web/lib/marked.min.js)');
    this.marked = marked.marked;
    this.purify = DOMPurify ?? null;
    this.hljs = hljs ?? null;
    this.katex = katex ?? null;
    this.hljs?.configure?.({ hideUpgradeWarningAcceptNoSupportOrSecurityUpdates: true });
    this.marked.use(markedOptions(this.hljs));
    this.purify?.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A') {
        node.setAttribute('target', '_blank');
        node.setAttribute('rel', LINK_REL);
      }
    });
  }

  // Markdown to HTML before sanitising (what marked makes of it). The
  // newline added at the end lets marked run a code fence still open (a
  // reply streaming) to the end, as CommonMark says; the one marked puts
  // after the last block would end the reply's text.
  toHtml(source) {
    return this.marked.parse(`${String(source ?? '').replace(/\u0000/g, '\uFFFD')}\n`).trimEnd();
  }

  // Markdown to sanitised HTML, for innerHTML; needs DOMPurify (a DOM).
  render(source) {
    return this.sanitize(this.toHtml(source));
  }

  // Any HTML cut down to ALLOWED_TAGS and ALLOWED_ATTR, links http(s) only
  // and opening elsewhere; needs DOMPurify (a DOM).
  sanitize(html) {
    if (this.purify === null) throw new Error('DOMPurify is not loaded (/web/lib/purify.min.js)');
    return this.purify.sanitize(html, {
      ALLOWED_TAGS,
      ALLOWED_ATTR,
      // DOMPurify checks every attribute's value against this, not only
      // URLs: http(s) URLs, or a value with no scheme ("left", "3").
      ALLOWED_URI_REGEXP: ALLOWED_VALUE,
      ALLOW_DATA_ATTR: false,
    });
  }

  // After `root`'s innerHTML was set from render(): math typeset, a Copy
  // button on each code block. Idempotent.
  enhance(root, copyText) {
    if (this.katex) {
      for (const el of root.querySelectorAll('.math-inline, .math-display')) {
        if (el.dataset.tex !== undefined) continue;
        const tex = el.textContent;
        el.dataset.tex = tex;
        try {
          this.katex.render(tex, el, {
            displayMode: el.classList.contains('math-display'),
            throwOnError: false,
            trust: false,
            strict: 'ignore',
            maxSize: 50,
            maxExpand: 1000,
          });
        } catch {
          el.textContent = tex;  // KaTeX refused it: the TeX as written
        }
      }
    }
    for (const pre of root.querySelectorAll('pre')) {
      if (pre.parentElement?.classList.contains('code-block')) continue;
      const box = document.createElement('div');
      box.className = 'code-block';
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'code-copy';
      button.textContent = 'Copy';
      button.title = 'Copy this code';
      button.addEventListener('click', async () => {
        const ok = await copyText(pre.textContent);
        button.textContent = ok ? 'Copied' : 'Copy failed';
        button.dataset.state = ok ? 'copied' : 'failed';
        setTimeout(() => {
          button.textContent = 'Copy';
          delete button.dataset.state;
        }, 2000);
      });
      pre.replaceWith(box);
      box.append(button, pre);
    }
  }
}

// The page's one renderer, over the libraries' globals (index.html loads
// their scripts before the modules); made on first use. marked's and
// DOMPurify's settings are global to them: make no second renderer in a page.
let shared = null;
export function pageRenderer() {
  shared ??= new MarkdownRenderer(globalThis);
  return shared;
}

// Puts `text` on the clipboard: the Clipboard API where the page is a secure
// context (https, localhost), else a hidden textarea and execCommand (plain
// http on a LAN address). Resolves whether it worked.
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // Refused (no permission): try the old way.
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'offscreen';
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}
