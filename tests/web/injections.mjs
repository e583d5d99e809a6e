// Model text that tries to become markup, for the page's Markdown adapter:
// markdown_test.mjs checks what marked makes of each, browser_test.mjs what
// reaches the page in Chromium (through DOMPurify, KaTeX and the Copy
// buttons). None may become markup; the ones that are markup stay visible as
// text. Scripts, event handlers, javascript: links, attribute breakouts, and
// HTML in code, in math and in tables.
export const INJECTIONS = [
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
  '| a | b |\n|---|---|\n| <script>alert(1)</script> | <img src=x onerror=alert(1)> |',
  '| [x](javascript:alert(1)) | `</td><script>alert(1)</script>` |\n|---|---|\n| 1 | 2 |',
  '$<img src=x onerror=alert(1)>$',
  '$$</span><script>alert(1)</script>$$',
  '\\(\\href{javascript:alert(1)}{x}\\)',
  '$\\htmlClass{x" onmouseover="alert(1)}{y}$',
  '```html\n<img src=x onerror=alert(1)>\n```',
  '![<img src=x onerror=alert(1)>](https://a.example/x.png)',
  '<div class="math-display">x</div><span class="hljs-string">y</span>',
];
