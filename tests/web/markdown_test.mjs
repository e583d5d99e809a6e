// The web page's Markdown renderer (gateway/web/markdown.mjs) under node:test:
// what it renders, and that model text can never become markup of its own
// (scripts, event handlers, javascript: links, attribute breakouts).
//   node --test tests/web/markdown_test.mjs
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { escapeHtml, renderMarkdown, safeUrl } from '../../gateway/web/markdown.mjs';

// The renderer's whole output vocabulary: these tags, these attributes.
const TAGS = new Set(['p', 'br', 'em', 'strong', 'del', 'code', 'pre', 'ul', 'ol', 'li', 'a',
  'h1', 'h2', 'h3', 'h4', 'h5', 'h6']);
const VOID = new Set(['br']);
const ATTRS = {
  a: { href: /^https?:\/\/[^\s"<>]+$/, target: /^_blank$/, rel: /^noopener noreferrer nofollow$/ },
  code: { class: /^language-[A-Za-z0-9_+#.-]+$/ },
  ol: { start: /^\d+$/ },
};

// Throws unless `html` is only allowed tags with allowed attributes, properly
// nested, and text with no raw '<', '>' or '"' (so nothing can open a tag or
// leave an attribute). Returns the text content, entities decoded.
function checkSafe(html) {
  const stack = [];
  let text = '';
  let last = 0;
  const tagRe = /<(\/?)([a-z0-9]+)((?:\s+[a-z]+="[^"]*")*)\s*>/g;
  for (let m; (m = tagRe.exec(html)) !== null;) {
    text += html.slice(last, m.index);
    last = tagRe.lastIndex;
    const [, closing, name, attrs] = m;
    assert.ok(TAGS.has(name), `tag <${name}> in ${JSON.stringify(html)}`);
    if (closing) {
      assert.equal(attrs, '', `attributes on </${name}>`);
      assert.equal(stack.pop(), name, `</${name}> closes the wrong element in ${JSON.stringify(html)}`);
      continue;
    }
    const seen = attrs.match(/[a-z]+="[^"]*"/g) ?? [];
    for (const a of seen) {
      const [, key, value] = /^([a-z]+)="([^"]*)"$/.exec(a);
      const allowed = ATTRS[name]?.[key];
      assert.ok(allowed, `attribute ${key} on <${name}> in ${JSON.stringify(html)}`);
      assert.match(value.replace(/&amp;/g, '&'), allowed, `${key}="${value}"`);
    }
    if (name === 'a') assert.ok(/href="/.test(attrs), 'a link without href');
    if (!VOID.has(name)) stack.push(name);
  }
  text += html.slice(last);
  assert.deepEqual(stack, [], `unclosed ${stack.join(', ')} in ${JSON.stringify(html)}`);
  assert.doesNotMatch(text, /[<>"]/, `raw markup characters in text of ${JSON.stringify(html)}`);
  return text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'").replace(/&amp;/g, '&');
}

test('escapeHtml escapes the five markup characters', () => {
  assert.equal(escapeHtml(`<a href="x" title='y'>&</a>`),
    '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
});

test('paragraphs, line breaks, headings', () => {
  assert.equal(renderMarkdown('one\ntwo\n\nthree'), '<p>one<br>two</p>\n<p>three</p>');
  assert.equal(renderMarkdown('# Title\n### Sub ###\n####### seven'),
    '<h1>Title</h1>\n<h3>Sub</h3>\n<p>####### seven</p>');
  assert.equal(renderMarkdown('#hashtag'), '<p>#hashtag</p>');
  assert.equal(renderMarkdown(''), '');
  assert.equal(renderMarkdown('a\r\nb'), '<p>a<br>b</p>');
});

test('emphasis, strong, strikethrough', () => {
  assert.equal(renderMarkdown('*a* _b_ **c** __d__ ~~e~~'),
    '<p><em>a</em> <em>b</em> <strong>c</strong> <strong>d</strong> <del>e</del></p>');
  assert.equal(renderMarkdown('**bold *and em* too**'),
    '<p><strong>bold <em>and em</em> too</strong></p>');
  assert.equal(renderMarkdown('snake_case_name and 2*3*4'), '<p>snake_case_name and 2<em>3</em>4</p>');
  assert.equal(renderMarkdown('* not emphasis'), '<ul><li>not emphasis</li></ul>');
  // Crossing spans render what nests and leave the rest as text.
  checkSafe(renderMarkdown('*a **b* c** _x __y_ z__'));
});

test('inline code and fenced code blocks', () => {
  assert.equal(renderMarkdown('use `a < b` and ``x ` y``'),
    '<p>use <code>a &lt; b</code> and <code>x ` y</code></p>');
  assert.equal(renderMarkdown('```python\nif a < b:\n    print("*x*")\n```\nafter'),
    '<pre><code class="language-python">if a &lt; b:\n    print(&quot;*x*&quot;)</code></pre>\n<p>after</p>');
  assert.equal(renderMarkdown('~~~\n**not bold**\n~~~'), '<pre><code>**not bold**</code></pre>');
  // A fence still open (a reply streaming) runs to the end.
  assert.equal(renderMarkdown('text\n```js\nlet x = 1;'),
    '<p>text</p>\n<pre><code class="language-js">let x = 1;</code></pre>');
  // A shorter or other fence does not close it.
  assert.equal(renderMarkdown('````\n```\n~~~\n````'), '<pre><code>```\n~~~</code></pre>');
});

test('lists: bullets, numbers, nesting, continuation lines', () => {
  assert.equal(renderMarkdown('- a\n- b\n\n1. x\n2. y'),
    '<ul><li>a</li><li>b</li></ul>\n<ol><li>x</li><li>y</li></ol>');
  assert.equal(renderMarkdown('3) three\n4) four'), '<ol start="3"><li>three</li><li>four</li></ol>');
  assert.equal(renderMarkdown('- a\n  - a1\n  - a2\n- b'),
    '<ul><li>a<ul><li>a1</li><li>a2</li></ul></li><li>b</li></ul>');
  assert.equal(renderMarkdown('- item\n  more of it'), '<ul><li>item<br>more of it</li></ul>');
  assert.equal(renderMarkdown('- a\n1. b'), '<ul><li>a</li></ul><ol><li>b</li></ol>');
  checkSafe(renderMarkdown('- a\n      - deep\n   - mid\n - shallow\n- top\n        9. n'));
});

test('links: http and https only', () => {
  assert.equal(renderMarkdown('[the docs](https://example.com/a?b=1&c=2)'),
    '<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" ' +
    'rel="noopener noreferrer nofollow">the docs</a></p>');
  assert.equal(renderMarkdown('see https://example.com/x.'),
    '<p>see <a href="https://example.com/x" target="_blank" ' +
    'rel="noopener noreferrer nofollow">https://example.com/x</a>.</p>');
  assert.match(renderMarkdown('[**b** `c`](http://h/)'), /<a href="http:\/\/h\/"[^>]*><strong>b<\/strong> <code>c<\/code><\/a>/);
  assert.equal(safeUrl('https://a.b/c'), 'https://a.b/c');
  for (const bad of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', ' javascript:alert(1)',
    'java\tscript:alert(1)', 'data:text/html,<script>alert(1)</script>', 'vbscript:x',
    '//evil.example/x', '/relative', 'https://', 'http:/x', 'https://a b', 'file:///etc/passwd',
    'https://a.b/\u0000x']) {
    assert.equal(safeUrl(bad), null, bad);
  }
});

// Each case: the model's text, and what the reader must see as plain text.
const INJECTIONS = [
  '<script>alert(1)</script>',
  '<SCRIPT SRC=//evil.example/x.js></SCRIPT>',
  '<img src=x onerror=alert(1)>',
  '<img src="x" onerror="alert(document.cookie)"/>',
  '<svg onload=alert(1)>',
  '<iframe src="javascript:alert(1)"></iframe>',
  '<a href="javascript:alert(1)">x</a>',
  '[click](javascript:alert(1))',
  '[click](JAVASCRIPT:alert(1))',
  '[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)',
  '[x](https://a.example/"onmouseover="alert(1))',
  '[x](https://a.example/\'onmouseover=\'alert(1))',
  '[x"><img src=x onerror=alert(1)>](https://a.example/)',
  'https://a.example/"><script>alert(1)</script>',
  'https://a.example/?q=<img/src/onerror=alert(1)>',
  '```"><script>alert(1)</script>\ncode\n```',
  '```js onerror=alert(1)\n</code></pre><script>alert(1)</script>\n```',
  '`</code><script>alert(1)</script>`',
  '**<img src=x onerror=alert(1)>**',
  '# <script>alert(1)</script>',
  '- <img src=x onerror=alert(1)>\n  - <script>x</script>',
  '&lt;script&gt;alert(1)&lt;/script&gt;',
  '<!-- comment --><style>*{display:none}</style>',
  '\u0000\u00000\u0000<script>alert(1)</script>',
  '<scr<script>ipt>alert(1)</scr</script>ipt>',
  '[a](https://x.example/)<b onclick=alert(1)>b</b>',
];

test('model text never becomes markup: injection cases', () => {
  for (const input of INJECTIONS) {
    const html = renderMarkdown(input);
    const text = checkSafe(html);
    assert.doesNotMatch(html, /<(script|img|svg|iframe|style|b)\b/i, input);
    assert.doesNotMatch(html, /href="(?!https?:)/i, input);
    assert.doesNotMatch(html, /<[^>]*\son[a-z]+=/i, input);
    // Tags the model wrote are still visible, as text.
    if (input.startsWith('<script>')) assert.ok(text.includes('<script>alert(1)</script>'), text);
    if (input.startsWith('<img src=x')) assert.ok(text.includes('<img src=x onerror=alert(1)>'), text);
  }
  assert.equal(renderMarkdown('<script>alert(1)</script>'),
    '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>');
  assert.equal(renderMarkdown('[click](javascript:alert(1))'), '<p>[click](javascript:alert(1))</p>');
});

test('random mixes of markdown and markup stay safe', () => {
  const pieces = ['<', '>', '"', "'", '&', '*', '**', '_', '`', '```', '~~~', '[', ']', '(', ')',
    '](', 'https://e.example/', 'javascript:', '<script>', '</code>', '<img src=x onerror=y>',
    '\n', '\n\n', '- ', '1. ', '# ', '  ', 'text', '\u0000', '0', '\u0000', 'onerror=', '=',
    '~~', '\\', '\t'];
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
  for (let n = 0; n < 3000; n++) {
    let s = '';
    const len = 1 + (next() % 40);
    for (let k = 0; k < len; k++) s += pieces[next() % pieces.length];
    checkSafe(renderMarkdown(s));
  }
});
