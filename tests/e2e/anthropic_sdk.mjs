// End-to-end check of the gateway's Anthropic Messages API (/v1/messages,
// docs/messages-api.md) through the official `@anthropic-ai/sdk` npm client
// (pinned in package-lock.json).
//
//   cd tests/e2e && npm ci && K3_API_KEY=KEY node anthropic_sdk.mjs HOST:PORT
//
// The gateway must run with API keys on and K3_API_KEY one of them (the
// wrong-key check needs keys on). The synthetic model writes random text, so
// only the API's shape is checked, plus what the constraints force (a named
// tool's call) and that the same seed gives the same text on
// /v1/chat/completions and /v1/messages. Prints one line per check and
// "N passed, N failed"; exits 1 on a failure.
import Anthropic from '@anthropic-ai/sdk';
import { CheckError, check, finish, show, step } from './check_runner.mjs';

const address = (process.argv[2] || process.env.K3_HTTP || '').replace(/^https?:\/\//, '');
const apiKey = process.env.K3_API_KEY || '';
if (!address || !apiKey) {
  console.error('usage: K3_API_KEY=KEY node anthropic_sdk.mjs HOST:PORT');
  process.exit(2);
}
const baseURL = `http://${address}`;
const options = { baseURL, maxRetries: 0, timeout: 300000 };
const client = new Anthropic({ ...options, apiKey });


// A message as Anthropic returns it; `maxTokens` bounds output_tokens.
function checkMessage(m, where, maxTokens) {
  check(m.type === 'message' && m.role === 'assistant', `${where}: ${show(m)}`);
  check(typeof m.id === 'string' && m.id.startsWith('msg_'), `${where}: id ${show(m.id)}`);
  check(Array.isArray(m.content), `${where}: content is not an array`);
  check(['end_turn', 'max_tokens', 'stop_sequence', 'tool_use'].includes(m.stop_reason),
        `${where}: stop_reason ${show(m.stop_reason)}`);
  const u = m.usage;
  check(Number.isInteger(u?.input_tokens) && Number.isInteger(u?.cache_read_input_tokens) &&
          u.input_tokens + u.cache_read_input_tokens > 0,
        `${where}: usage ${show(u)}`);
  check(Number.isInteger(u.output_tokens) && u.output_tokens > 0 && u.output_tokens <= maxTokens,
        `${where}: output_tokens ${u.output_tokens} not in 1..${maxTokens}`);
  if (m.stop_reason === 'max_tokens')
    check(u.output_tokens === maxTokens, `${where}: max_tokens after ${u.output_tokens} tokens`);
}

const models = await (await fetch(`${baseURL}/v1/models`, {
  headers: { authorization: `Bearer ${apiKey}` },
})).json();
const model = models.data[0].id;
const hello = [{ role: 'user', content: 'Hello! Say something short.' }];
const weather = {
  name: 'get_weather',
  description: 'The current weather in a city.',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 12 } },
    required: ['city'],
  },
};
console.log(`gateway: ${baseURL} model: ${model}`);

await step('messages.create, thinking off (the default): no thinking block', async () => {
  const m = await client.messages.create({ model, max_tokens: 16, messages: hello,
                                           system: 'Be brief.', temperature: 0.7 });
  checkMessage(m, 'create', 16);
  check(m.content.every((b) => b.type === 'text'), `blocks: ${show(m.content)}`);
});

await step('messages.create, thinking enabled: a thinking block first', async () => {
  const m = await client.messages.create({
    model, max_tokens: 24, messages: hello,
    thinking: { type: 'enabled', budget_tokens: 16 },
  });
  checkMessage(m, 'create+thinking', 24);
  check(m.content[0]?.type === 'thinking' && typeof m.content[0].thinking === 'string' &&
          m.content[0].thinking.length > 0,
        `content[0] is not a thinking block: ${show(m.content)}`);
});

await step('messages.stream: events add up to finalMessage()', async () => {
  const stream = client.messages.stream({
    model, max_tokens: 20, messages: hello, thinking: { type: 'enabled', budget_tokens: 8 },
  });
  let text = '';
  let thinking = '';
  stream.on('text', (t) => { text += t; });
  stream.on('thinking', (t) => { thinking += t; });
  const m = await stream.finalMessage();
  checkMessage(m, 'stream', 20);
  const joined = (type, key) => m.content.filter((b) => b.type === type).map((b) => b[key]).join('');
  check(joined('text', 'text') === text, `text events ${show(text)} != ${show(m.content)}`);
  check(joined('thinking', 'thinking') === thinking && thinking.length > 0,
        `thinking events ${show(thinking)} != ${show(m.content)}`);
});

let toolMessage = null;
await step('tool_use: tool_choice tool forces a call with a valid input', async () => {
  const m = await client.messages.create({
    // Room for the call's markup (its shortest form counts ~150 tokens of
    // one byte each): the constraint closes the free text in time for it.
    model, max_tokens: 400, messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [weather], tool_choice: { type: 'tool', name: 'get_weather' },
  });
  checkMessage(m, 'tool_use', 400);
  check(m.stop_reason === 'tool_use', `stop_reason ${m.stop_reason}: ${show(m.content)}`);
  const call = m.content.find((b) => b.type === 'tool_use');
  check(call && call.name === 'get_weather' && typeof call.id === 'string',
        `no get_weather tool_use: ${show(m.content)}`);
  check(typeof call.input?.city === 'string', `input ${show(call.input)}`);
  toolMessage = m;
});

await step('tool_result round trip: the history with tool_use and tool_result runs', async () => {
  check(toolMessage, 'no tool_use from the previous step');
  const call = toolMessage.content.find((b) => b.type === 'tool_use');
  const m = await client.messages.create({
    model, max_tokens: 16, tools: [weather], tool_choice: { type: 'none' },
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: toolMessage.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] },
    ],
  });
  checkMessage(m, 'round trip', 16);
  check(m.content.every((b) => b.type !== 'tool_use'), `tool_choice none called: ${show(m.content)}`);
});

await step('countTokens: the prompt create reads', async () => {
  const body = { model, messages: hello, system: 'Count me.' };
  const counted = await client.messages.countTokens(body);
  check(Number.isInteger(counted.input_tokens) && counted.input_tokens > 0, show(counted));
  const m = await client.messages.create({ ...body, max_tokens: 1 });
  const u = m.usage;
  check(u.input_tokens + u.cache_read_input_tokens === counted.input_tokens,
        `create read ${show(u)}, count_tokens said ${counted.input_tokens}`);
});

await step('the same seed gives the same text on /v1/chat/completions and /v1/messages', async () => {
  const chat = await (await fetch(`${baseURL}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: hello, max_tokens: 12, seed: 99, temperature: 1,
                           thinking: false }),
  })).json();
  const m = await client.messages.create({ model, messages: hello, max_tokens: 12,
                                           temperature: 1, seed: 99 });
  const text = m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  check(text === chat.choices[0].message.content,
        `messages ${show(text)} != chat ${show(chat.choices[0].message.content)}`);
  check(m.usage.output_tokens === chat.usage.completion_tokens, 'token counts differ');
});

await step('a wrong API key is the SDK\'s AuthenticationError', async () => {
  const wrong = new Anthropic({ ...options, apiKey: 'sk-wrong-key-0000000000000' });
  try {
    await wrong.messages.create({ model, max_tokens: 4, messages: hello });
    throw new CheckError('a wrong key was accepted');
  } catch (e) {
    if (e instanceof CheckError) throw e;
    check(e instanceof Anthropic.AuthenticationError, `${e.constructor.name}: ${e.message}`);
    check(e.error?.type === 'error' && e.error?.error?.type === 'authentication_error',
          `body ${show(e.error)}`);
  }
});

await step('a bad request is the SDK\'s BadRequestError naming the field', async () => {
  try {
    await client.messages.create({ model, max_tokens: 4, messages: hello, temperature: 3 });
    throw new CheckError('temperature 3 was accepted');
  } catch (e) {
    if (e instanceof CheckError) throw e;
    check(e instanceof Anthropic.BadRequestError, `${e.constructor.name}: ${e.message}`);
    check(e.error?.error?.message?.includes('temperature'), `body ${show(e.error)}`);
  }
});

finish();
