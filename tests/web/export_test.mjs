// The page's conversation export (gateway/web/export.mjs) under node:test:
// the JSON document (chat-API-shaped messages, the reply's details, settings
// without the API key) and the Markdown one, and the file names.
//   node --test tests/web/export_test.mjs
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  conversationJson, conversationMarkdown, EXPORT_FORMAT, exportFileName,
} from '../../gateway/web/export.mjs';

const conversation = {
  id: 'c1',
  title: 'Hello! Who are you?',
  updated: 0,
  messages: [
    { role: 'user', content: 'Hello! Who are you?' },
    {
      role: 'assistant', content: 'I am **K3**.\n\n| a | b |\n|---|---|\n| 1 | 2 |', reasoning: 'They ask.\n\nAnswer briefly.',
      toolCalls: [], finishReason: 'stop', stats: { ttftMs: 120, completionTokens: 9 },
    },
    { role: 'user', content: 'Call a tool' },
    {
      role: 'assistant', content: '', reasoning: '', finishReason: 'tool_calls',
      toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris ```"}' }],
    },
    { role: 'user', content: 'Think long' },
    { role: 'assistant', content: '', reasoning: 'Hmm, let me', toolCalls: [], finishReason: 'length' },
    { role: 'user', content: 'And stop' },
    { role: 'assistant', content: 'Part', reasoning: '', toolCalls: [], stopped: true },
  ],
};
const settings = {
  apiKey: 'sk-secret-key', temperature: 0.6, maxTokens: 8192, thinking: true, effort: 'max', systemPrompt: 'Be brief.',
};
const now = new Date('2026-12-03T16:40:12.345Z');

test('JSON: chat-API-shaped messages with the reply details; no API key', () => {
  const text = conversationJson(conversation, { model: 'kimi-k3', settings, now });
  assert.ok(!text.includes('sk-secret-key'), 'the API key was exported');
  const doc = JSON.parse(text);
  assert.equal(doc.format, EXPORT_FORMAT);
  assert.equal(doc.version, 1);
  assert.equal(doc.title, 'Hello! Who are you?');
  assert.equal(doc.model, 'kimi-k3');
  assert.equal(doc.exported_at, '2026-12-03T16:40:12.345Z');
  assert.deepEqual(doc.settings, {
    system_prompt: 'Be brief.', temperature: 0.6, max_tokens: 8192, thinking: true, thinking_effort: 'max',
  });
  assert.equal(doc.messages.length, 8);
  assert.deepEqual(doc.messages[0], { role: 'user', content: 'Hello! Who are you?' });
  assert.deepEqual(doc.messages[1], {
    role: 'assistant', content: conversation.messages[1].content, reasoning_content: 'They ask.\n\nAnswer briefly.',
    finish_reason: 'stop', stats: { ttftMs: 120, completionTokens: 9 },
  });
  assert.deepEqual(doc.messages[3], {
    role: 'assistant', content: '', finish_reason: 'tool_calls',
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris ```"}' } }],
  });
  assert.equal(doc.messages[5].finish_reason, 'length');
  assert.equal(doc.messages[7].stopped, true);
  // Without model or settings those keys are left out.
  const bare = JSON.parse(conversationJson({ title: 't', messages: [] }, { now }));
  assert.deepEqual(Object.keys(bare), ['format', 'version', 'title', 'exported_at', 'messages']);
});

test('Markdown: headings per message, thinking quoted, tool calls fenced, cut-offs said', () => {
  const text = conversationMarkdown(conversation, { model: 'kimi-k3', now });
  assert.ok(text.startsWith('# Hello! Who are you?\n\n*Exported from k3serve on 2026-12-03 16:40 UTC · model kimi-k3*\n\n'), text);
  assert.ok(text.includes('## You\n\nHello! Who are you?\n\n## K3\n\n**Thinking**\n\n> They ask.\n>\n> Answer briefly.\n\nI am **K3**.\n\n| a | b |'), text);
  // The arguments hold three backticks: the fence is longer.
  assert.ok(text.includes('**Tool call: get_weather**\n\n````json\n{\n  "city": "Paris ```"\n}\n````\n'), text);
  assert.ok(text.includes('*Ended with a tool call: this page does not run tools.*'), text);
  assert.ok(text.includes('> Hmm, let me\n\n*Max tokens reached while thinking: no answer yet.'), text);
  assert.ok(text.includes('Part\n\n*Stopped.*\n'), text);
  assert.ok(text.endsWith('*Stopped.*\n'), text);
  assert.ok(!/\n\n\n/.test(text), 'blank lines doubled');
});

test('file names from the title', () => {
  assert.equal(exportFileName(conversation, 'json'), 'k3serve-hello-who-are-you.json');
  assert.equal(exportFileName({ title: '¿Qué pasó? ' }, 'md'), 'k3serve-que-paso.md');
  assert.equal(exportFileName({ title: '<>' }, 'md'), 'k3serve-conversation.md');
  assert.equal(exportFileName({ title: 'a'.repeat(80) }, 'md'), `k3serve-${'a'.repeat(48)}.md`);
});
