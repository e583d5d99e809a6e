// The page's API client (gateway/web/chat_api.mjs) under node:test: the
// request built from settings, chunks folded into a reply (reasoning,
// content, tool calls, usage), and the SSE reader against a local HTTP
// server that splits events at awkward places, sends errors, or stops early,
// and the progress comments (queued, prompt reading) read from the stream,
// and the notice a reply shows for its finish_reason.
//   node --test tests/web/chat_api_test.mjs
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';

import {
  ApiError, applyChunk, chatRequestBody, finishNotice, parseProgressComment, streamChat,
} from '../../gateway/web/chat_api.mjs';

const settings = {
  apiKey: '', temperature: 0.7, maxTokens: 64, thinking: true, effort: 'high', systemPrompt: 'Be kind.',
};

test('the request: system prompt, history without reasoning, thinking and effort', () => {
  const messages = [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: 'hello', reasoning: 'secret', toolCalls: [] },
    { role: 'assistant', content: '', reasoning: '', toolCalls: [], error: 'boom' },
    { role: 'assistant', content: '', reasoning: '', toolCalls: [{ id: 'c1', name: 'f', arguments: '{}' }] },
    { role: 'user', content: 'again' },
  ];
  const body = chatRequestBody(settings, messages, 'k3');
  assert.deepEqual(body.messages, [
    { role: 'system', content: 'Be kind.' },
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: 'hello' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
    { role: 'user', content: 'again' },
  ]);
  assert.equal(body.model, 'k3');
  assert.equal(body.stream, true);
  assert.deepEqual(body.stream_options, { include_usage: true });
  assert.equal(body.temperature, 0.7);
  assert.equal(body.max_tokens, 64);
  assert.equal(body.thinking, true);
  assert.equal(body.thinking_effort, 'high');
  // The model's default, max, is sent as chosen; thinking off sends none.
  assert.equal(chatRequestBody({ ...settings, effort: 'max' }, [], '').thinking_effort, 'max');
  const off = chatRequestBody({ ...settings, thinking: false, systemPrompt: '  ' }, [], '');
  assert.equal(off.thinking, false);
  assert.equal(off.thinking_effort, undefined);
  assert.equal(off.messages.length, 0);
  assert.equal(off.model, undefined);
});

test('chunks fold into a reply', () => {
  const r = { content: '', reasoning: '', toolCalls: [] };
  assert.equal(applyChunk(r, { choices: [{ delta: { role: 'assistant', content: '' } }] }), false);
  assert.equal(applyChunk(r, { choices: [{ delta: { reasoning_content: 'hmm' } }] }), true);
  assert.equal(applyChunk(r, { choices: [{ delta: { content: 'Hel' } }] }), true);
  applyChunk(r, { choices: [{ delta: { content: 'lo' } }] });
  applyChunk(r, { choices: [{ delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get', arguments: '{"a"' } }] } }] });
  applyChunk(r, { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: ': 1}' } }] } }] });
  applyChunk(r, { choices: [{ delta: { tool_calls: [{ index: 1, id: 'call_2', function: { name: 'put', arguments: '' } }] } }] });
  applyChunk(r, { choices: [{ delta: {}, finish_reason: 'tool_calls' }] });
  applyChunk(r, { choices: [], usage: { prompt_tokens: 9, completion_tokens: 4 } });
  assert.equal(r.reasoning, 'hmm');
  assert.equal(r.content, 'Hello');
  assert.deepEqual(r.toolCalls, [
    { id: 'call_1', name: 'get', arguments: '{"a": 1}' },
    { id: 'call_2', name: 'put', arguments: '' },
  ]);
  assert.equal(r.finishReason, 'tool_calls');
  assert.deepEqual(r.usage, { prompt_tokens: 9, completion_tokens: 4 });
});

// A server whose answer for each path is scripted: a list of raw writes.
let server;
let base;
const scripts = new Map();
before(async () => {
  server = http.createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    const script = scripts.get(req.url);
    res.on('close', () => { script.closed = true; });
    script.request = { headers: req.headers, body };
    res.writeHead(script.status ?? 200, { 'Content-Type': script.type ?? 'text/event-stream' });
    for (const w of script.writes) {
      if (res.destroyed) return;
      if (typeof w === 'number') await new Promise((r) => setTimeout(r, w));
      else res.write(w);
    }
    if (!script.hang) res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
  // chat_api fetches relative URLs, as the page does on its own origin.
  const realFetch = globalThis.fetch;
  globalThis.fetch = (url, init) => realFetch(`${base}${url}`, init);
});
after(() => server.close());

async function collect(script, extra = {}) {
  scripts.set('/v1/chat/completions', script);
  const chunks = [];
  await streamChat({ body: { messages: [] }, apiKey: 'sk-1', onChunk: (c) => chunks.push(c), ...extra });
  return chunks;
}

test('SSE events split anywhere, comments and multi-line data', async () => {
  const e1 = 'data: {"choices":[{"delta":{"content":"a\\nb"}}]}\n\n';
  const e2 = ': keep-alive\n\ndata: {"choices":[{"delta":{"content":"é"}}]}\n\n' +
    'data: {"choices":\ndata: [{"delta":{"content":"m"}}]}\n\n';
  const all = Buffer.from(e1 + e2 + 'data: [DONE]\n\n');
  // Split inside the 'é' (two bytes) and inside the blank line.
  const cut1 = all.indexOf(Buffer.from('é')) + 1;
  const script = { writes: [all.subarray(0, 5), 5, all.subarray(5, cut1), 5, all.subarray(cut1, cut1 + 40), all.subarray(cut1 + 40)] };
  const chunks = await collect(script);
  assert.deepEqual(chunks.map((c) => c.choices[0].delta.content), ['a\nb', 'é', 'm']);
  assert.equal(script.request.headers.authorization, 'Bearer sk-1');
  assert.equal(script.request.headers['content-type'], 'application/json');
  assert.deepEqual(JSON.parse(script.request.body), { messages: [] });
});

test('an error status is an ApiError with the server message', async () => {
  const script = { status: 401, type: 'application/json', writes: ['{"error":{"message":"missing or invalid API key","code":"invalid_api_key"}}'] };
  await assert.rejects(collect(script), (e) => {
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 401);
    assert.equal(e.code, 'invalid_api_key');
    assert.equal(e.message, 'missing or invalid API key');
    return true;
  });
  const plain = { status: 502, type: 'text/plain', writes: ['bad gateway'] };
  await assert.rejects(collect(plain), /502/);
});

test('an error event mid-stream, a stream cut short, an event that is not JSON', async () => {
  const chunks = [];
  await assert.rejects(collect({
    writes: ['data: {"choices":[{"delta":{"content":"x"}}]}\n\n', 'data: {"error":{"message":"engine failed","code":"internal"}}\n\n'],
  }, { onChunk: (c) => chunks.push(c) }), /engine failed/);
  assert.equal(chunks.length, 1);
  await assert.rejects(collect({ writes: ['data: {"choices":[]}\n\n'] }), /before \[DONE\]/);
  await assert.rejects(collect({ writes: ['data: <html>\n\n'] }), /not JSON/);
});

test('aborting closes the connection', async () => {
  const script = { hang: true, writes: ['data: {"choices":[{"delta":{"content":"x"}}]}\n\n'] };
  const controller = new AbortController();
  const done = collect(script, {
    signal: controller.signal,
    onChunk: () => controller.abort(),
  });
  await assert.rejects(done, (e) => e.name === 'AbortError');
  for (let i = 0; i < 50 && !script.closed; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(script.closed, true, 'the server did not see the disconnect');
});

test('progress comments: queued, prefill with and without a time left; others are not progress', () => {
  assert.deepEqual(parseProgressComment(': queued 3'), { queued: 3 });
  assert.deepEqual(parseProgressComment(':queued 12\r'), { queued: 12 });
  assert.deepEqual(parseProgressComment(': prefill 3200/10000 eta_s=840'), { done: 3200, total: 10000, etaS: 840 });
  assert.deepEqual(parseProgressComment(': prefill 0/2048 eta_s=-1'), { done: 0, total: 2048, etaS: -1 });
  assert.deepEqual(parseProgressComment(': prefill 64/2048 eta_s=12.5'), { done: 64, total: 2048, etaS: 12.5 });
  assert.deepEqual(parseProgressComment(': prefill 0/2048'), { done: 0, total: 2048 });
  for (const other of [': keep-alive', ':', ': queued', ': queued -1', ': queued 3 more', ': prefill 3/x',
    ': prefill 3/4 eta_s=soon', 'data: queued 3', ': prefilled 1/2']) {
    assert.equal(parseProgressComment(other), null, other);
  }
});

test('the stream hands each progress comment to onProgress, in order, before the text', async () => {
  const seen = [];
  const script = {
    writes: [
      'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n',
      ': queued 2\n\n', 5, ': queued 1\n\n: keep-alive\n\n',
      ': prefill 0/3000 eta_s=-1\n\n', 5, ': prefill 1024/3000 eta', '_s=65\n\n',
      ': prefill 3000/3000 eta_s=0\n\n',
      'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n', 'data: [DONE]\n\n',
    ],
  };
  const chunks = [];
  await collect(script, {
    onProgress: (p) => seen.push({ ...p, chunksBefore: chunks.length }),
    onChunk: (c) => chunks.push(c),
  });
  assert.deepEqual(seen, [
    { queued: 2, chunksBefore: 1 },
    { queued: 1, chunksBefore: 1 },
    { done: 0, total: 3000, etaS: -1, chunksBefore: 1 },
    { done: 1024, total: 3000, etaS: 65, chunksBefore: 1 },
    { done: 3000, total: 3000, etaS: 0, chunksBefore: 1 },
  ]);
  assert.equal(chunks.length, 2);
  // Without onProgress the comments are skipped, as before.
  assert.equal((await collect(script)).length, 2);
});

test('finish notices: none for stop; length inside thinking, length in the answer, other reasons', () => {
  const reply = (finishReason, content, reasoning, toolCalls = []) => ({ finishReason, content, reasoning, toolCalls });
  assert.equal(finishNotice(reply('stop', 'Hi', 'hm')), '');
  assert.equal(finishNotice(reply(null, '', '')), '');
  assert.equal(finishNotice(reply(undefined, 'x', '')), '');
  // The cut-off that looked empty: all thinking, no answer (issue 27).
  assert.match(finishNotice(reply('length', '', 'Let me think about')), /^Max tokens reached while thinking: no answer yet\./);
  assert.match(finishNotice(reply('length', 'The answer is', 'thought')), /^Max tokens reached: the answer is cut off\./);
  assert.match(finishNotice(reply('length', '', '')), /^Max tokens reached: /);
  assert.match(finishNotice(reply('length', '', 'thought', [{ id: 'c', name: 'f', arguments: '{' }])), /^Max tokens reached: /);
  assert.equal(finishNotice(reply('tool_calls', '', '', [{ id: 'c', name: 'f', arguments: '{}' }])),
    'Ended with a tool call: this page does not run tools.');
  assert.equal(finishNotice(reply('content_filter', '', '')), 'Stopped by a content filter.');
  assert.equal(finishNotice(reply('some_new_reason', 'x', '')), 'Ended: some new reason.');
});

test('the finish reason is folded from the last chunk', () => {
  const r = { content: '', reasoning: '', toolCalls: [], usage: null, finishReason: null };
  applyChunk(r, { choices: [{ index: 0, delta: { reasoning_content: 'hm' }, finish_reason: null }] });
  assert.equal(r.finishReason, null);
  applyChunk(r, { choices: [{ index: 0, delta: {}, finish_reason: 'length' }] });
  assert.equal(r.finishReason, 'length');
  assert.match(finishNotice(r), /while thinking/);
});
