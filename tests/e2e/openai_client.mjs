// End-to-end check of the gateway's OpenAI-compatible HTTP API through the
// official `openai` npm client (pinned in package-lock.json).
//
//   cd tests/e2e && npm ci && node openai_client.mjs [HOST:PORT | http=HOST:PORT ...]
//
// The address comes from the first argument or env K3_HTTP (HOST:PORT; the
// fields of run-local.sh's READY line are accepted as they are); the API key
// from env K3_API_KEY (default "none"). The synthetic model writes random
// text, so nothing here looks at what it says: only at the API's shape.
// Prints one line per check and "N passed, N failed"; exits 1 on a failure.
import OpenAI from 'openai';
import { CheckError, check, finish, show, step } from './check_runner.mjs';

// --- Where the gateway is.
function httpAddress() {
  let addr = process.env.K3_HTTP || '';
  for (const arg of process.argv.slice(2)) {
    if (arg.startsWith('http=')) addr = arg.slice(5);
    else if (!arg.includes('=')) addr = arg;
  }
  if (!addr) {
    console.error('usage: node openai_client.mjs HOST:PORT   (or env K3_HTTP=HOST:PORT)');
    process.exit(2);
  }
  return addr.replace(/^https?:\/\//, '').replace(/\/+$/, '');
}

const address = httpAddress();
const client = new OpenAI({
  baseURL: `http://${address}/v1`,
  apiKey: process.env.K3_API_KEY || 'none',
  maxRetries: 0, // a retry would hide a failure
  timeout: Number(process.env.K3_E2E_TIMEOUT_MS || 300000),
});


// usage: positive counts that add up.
function checkUsage(usage, where, { maxCompletion } = {}) {
  check(usage && typeof usage === 'object', `${where}: no usage object`);
  const { prompt_tokens: p, completion_tokens: c, total_tokens: t } = usage;
  check(Number.isInteger(p) && p > 0, `${where}: usage.prompt_tokens ${p} is not > 0`);
  check(Number.isInteger(c) && c > 0, `${where}: usage.completion_tokens ${c} is not > 0`);
  check(t === p + c, `${where}: usage.total_tokens ${t} != ${p} + ${c}`);
  if (maxCompletion !== undefined)
    check(c <= maxCompletion, `${where}: completion_tokens ${c} > max_tokens ${maxCompletion}`);
}

// Tool calls as OpenAI returns them (each: id call_..., type function, name, arguments).
function checkToolCalls(calls, where) {
  check(Array.isArray(calls), `${where}: tool_calls is not an array: ${show(calls)}`);
  for (const [i, call] of calls.entries()) {
    check(typeof call.id === 'string' && call.id.startsWith('call_'),
          `${where}: tool_calls[${i}].id ${show(call.id)} does not start with call_`);
    check(call.type === 'function', `${where}: tool_calls[${i}].type is ${show(call.type)}`);
    check(typeof call.function?.name === 'string' && call.function.name.length > 0,
          `${where}: tool_calls[${i}].function.name is ${show(call.function?.name)}`);
    check(typeof call.function?.arguments === 'string',
          `${where}: tool_calls[${i}].function.arguments is not a string`);
  }
}

// Expects `promise` to fail with `ErrorClass` (HTTP `status`); returns the error.
async function expectApiError(promise, ErrorClass, status) {
  try {
    const r = await promise;
    throw new CheckError(`expected HTTP ${status}, got a success: ${show(r)}`);
  } catch (e) {
    if (e instanceof CheckError) throw e;
    check(e instanceof ErrorClass,
          `expected ${ErrorClass.name} (HTTP ${status}), got ${e.constructor.name} ` +
            `(status ${e.status}): ${e.message}`);
    check(e.status === status, `expected status ${status}, got ${e.status}`);
    // The OpenAI error body: {"error": {"message": ..., "type": ...}}.
    check(typeof e.error?.message === 'string' && e.error.message.length > 0,
          `error body has no error.message: ${show(e.error)}`);
    return e;
  }
}

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The current weather in a city.',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', description: 'City name' } },
      required: ['city'],
    },
  },
};
const messages = [{ role: 'user', content: 'Hello! Say something short.' }];

console.log(`gateway: http://${address}/v1`);
let model = '';

await step('GET /v1/models lists exactly one model', async () => {
  const page = await client.models.list();
  const models = page.data;
  check(Array.isArray(models) && models.length === 1,
        `expected one model, got ${show(models)}`);
  check(typeof models[0].id === 'string' && models[0].id.length > 0, 'model id is empty');
  check(models[0].object === 'model', `object is ${show(models[0].object)}, not "model"`);
  model = models[0].id;
  console.log(`     model: ${model}`);
});

await step('chat completion (non-streaming)', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 16 });
  check(r.object === 'chat.completion', `object is ${show(r.object)}`);
  check(typeof r.id === 'string' && r.id.length > 0, 'no id');
  check(Array.isArray(r.choices) && r.choices.length === 1, `choices: ${show(r.choices)}`);
  const choice = r.choices[0];
  check(choice.message?.role === 'assistant', `message.role is ${show(choice.message?.role)}`);
  check(['stop', 'length'].includes(choice.finish_reason),
        `finish_reason is ${show(choice.finish_reason)}`);
  check(choice.message.content === null || typeof choice.message.content === 'string',
        'message.content is neither a string nor null');
  checkUsage(r.usage, 'usage', { maxCompletion: 16 });
});

await step('chat completion (streaming, include_usage)', async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 16, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  check(chunks.length > 0, 'no chunks');
  for (const c of chunks) {
    check(c.object === 'chat.completion.chunk', `chunk object is ${show(c.object)}`);
    check(c.id === chunks[0].id, 'chunks carry different ids');
  }
  const withChoices = chunks.filter((c) => c.choices?.length > 0);
  const deltas = withChoices.map((c) => c.choices[0].delta || {});
  check(deltas.some((d) => d.content || d.reasoning_content),
        'no chunk has a content or reasoning_content delta');
  const lastChoice = withChoices.at(-1)?.choices[0];
  check(['stop', 'length'].includes(lastChoice?.finish_reason),
        `last choice chunk's finish_reason is ${show(lastChoice?.finish_reason)}`);
  // include_usage: a final chunk with empty choices and the usage.
  const last = chunks.at(-1);
  check(last.usage && Array.isArray(last.choices) && last.choices.length === 0,
        `the last chunk is not a usage chunk: ${show(last)}`);
  checkUsage(last.usage, 'stream usage', { maxCompletion: 16 });
  const text = deltas.map((d) => (d.reasoning_content || '') + (d.content || '')).join('');
  console.log(`     ${chunks.length} chunks, ${text.length} characters`);
});

await step('max_tokens 5 stops at the length limit', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 5 });
  const choice = r.choices[0];
  checkUsage(r.usage, 'usage', { maxCompletion: 5 });
  if (choice.finish_reason === 'stop') {
    // Random text may end (EOS) before 5 tokens; then it really stopped early.
    check(r.usage.completion_tokens < 5,
          `finish_reason "stop" with ${r.usage.completion_tokens} tokens: expected "length"`);
    console.log('     (the model stopped before 5 tokens)');
  } else {
    check(choice.finish_reason === 'length', `finish_reason is ${show(choice.finish_reason)}`);
  }
});

await step('tools + tool_choice "required" (non-streaming)', async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools: [weatherTool],
    tool_choice: 'required',
    max_tokens: 48,
  });
  const choice = r.choices[0];
  check(choice.message?.role === 'assistant', `message.role is ${show(choice.message?.role)}`);
  check(['stop', 'length', 'tool_calls'].includes(choice.finish_reason),
        `finish_reason is ${show(choice.finish_reason)}`);
  const calls = choice.message.tool_calls;
  if (calls !== undefined && calls !== null && calls.length > 0) {
    checkToolCalls(calls, 'message');
    console.log(`     ${calls.length} tool call(s): ${calls.map((c) => c.function.name).join(', ')}`);
  } else {
    console.log('     (no tool call in the random output)');
  }
  checkUsage(r.usage, 'usage', { maxCompletion: 48 });
});

await step('tools + tool_choice "required" (streaming)', async () => {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools: [weatherTool],
    tool_choice: 'required',
    max_tokens: 48,
    stream: true,
  });
  // Tool-call deltas assemble by index: the first carries id, type and name,
  // the following ones fragments of the arguments.
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices || []) {
      for (const d of choice.delta?.tool_calls || []) {
        check(Number.isInteger(d.index), `tool call delta without an index: ${show(d)}`);
        if (!calls[d.index]) {
          calls[d.index] = { id: d.id, type: d.type, function: { name: d.function?.name, arguments: '' } };
        }
        calls[d.index].function.arguments += d.function?.arguments || '';
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  check(['stop', 'length', 'tool_calls'].includes(finish), `finish_reason is ${show(finish)}`);
  check(calls.every((c) => c), 'tool call indexes have gaps');
  if (calls.length > 0) {
    checkToolCalls(calls, 'stream');
    console.log(`     ${calls.length} streamed tool call(s)`);
  } else {
    console.log('     (no tool call in the random output)');
  }
});

await step('completions (non-streaming, max_tokens 8)', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8 });
  check(r.object === 'text_completion', `object is ${show(r.object)}`);
  check(r.choices?.length === 1, `choices: ${show(r.choices)}`);
  check(typeof r.choices[0].text === 'string', 'choices[0].text is not a string');
  check(['stop', 'length'].includes(r.choices[0].finish_reason),
        `finish_reason is ${show(r.choices[0].finish_reason)}`);
  checkUsage(r.usage, 'usage', { maxCompletion: 8 });
});

await step('completions (streaming, max_tokens 8)', async () => {
  const stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 8, stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  check(chunks.length > 0, 'no chunks');
  const withChoices = chunks.filter((c) => c.choices?.length > 0);
  check(withChoices.every((c) => typeof c.choices[0].text === 'string'),
        'a chunk has no text string');
  const finish = withChoices.at(-1)?.choices[0].finish_reason;
  check(['stop', 'length'].includes(finish), `last finish_reason is ${show(finish)}`);
  const usage = chunks.at(-1).usage;
  if (usage) checkUsage(usage, 'stream usage', { maxCompletion: 8 });
  console.log(`     ${chunks.length} chunks${usage ? ', with a usage chunk' : ''}`);
});

await step('seed + top_k 1: greedy at temperature 2, reproducible', async () => {
  const ask = (extra) => client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 8, ...extra,
  });
  const greedy = (await ask({ temperature: 0 })).choices[0].text;
  // top_k, min_p, repetition_penalty are vLLM's fields: the client passes them on.
  const k1 = (await ask({ temperature: 2, top_k: 1, seed: 3, min_p: 0.01 })).choices[0].text;
  check(k1 === greedy, `top_k 1 gave ${show(k1)}, greedy ${show(greedy)}`);
  const a = (await ask({ temperature: 1.5, seed: 77 })).choices[0].text;
  const b = (await ask({ temperature: 1.5, seed: 77 })).choices[0].text;
  check(a === b, `seed 77 gave ${show(a)} then ${show(b)}`);
});

await step('chat logprobs + top_logprobs (streaming and not)', async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 6, logprobs: true, top_logprobs: 2,
  });
  const content = r.choices[0].logprobs?.content;
  check(Array.isArray(content) && content.length === r.usage.completion_tokens,
        `logprobs.content ${show(content)} for ${r.usage.completion_tokens} tokens`);
  for (const e of content) {
    check(typeof e.token === 'string' && Array.isArray(e.bytes), `entry ${show(e)}`);
    check(e.logprob <= 0 && e.top_logprobs.length === 2, `entry ${show(e)}`);
    check(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob, `top order ${show(e)}`);
    check(e.logprob <= e.top_logprobs[0].logprob + 1e-6, `above the top: ${show(e)}`);
  }
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 6, logprobs: true, stream: true,
  });
  let entries = 0;
  for await (const chunk of stream) {
    for (const choice of chunk.choices || []) entries += choice.logprobs?.content?.length || 0;
  }
  check(entries > 0 && entries <= 6, `${entries} streamed logprob entries`);
});

await step('completions logprobs 3', async () => {
  const r = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 5, logprobs: 3,
  });
  const lp = r.choices[0].logprobs;
  check(lp && lp.tokens.length === r.usage.completion_tokens, `logprobs ${show(lp)}`);
  check(lp.token_logprobs.every((v) => v <= 0), `token_logprobs ${show(lp.token_logprobs)}`);
  check(lp.top_logprobs.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 3),
        `top_logprobs ${show(lp.top_logprobs)}`);
  check(lp.text_offset.length === lp.tokens.length, `text_offset ${show(lp.text_offset)}`);
});

await step('reasoning_effort "medium" is accepted (K3 high)', async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 4, reasoning_effort: 'medium',
  });
  check(r.choices.length === 1, `choices: ${show(r.choices)}`);
});

await step('store true -> 400 naming store', async () => {
  const e = await expectApiError(
    client.chat.completions.create({ model, messages, max_tokens: 4, store: true }),
    OpenAI.BadRequestError, 400);
  check(/'store'/.test(e.error.message), `error.message: ${show(e.error.message)}`);
});

await step('unknown model -> 404 NotFoundError', async () => {
  await expectApiError(
    client.chat.completions.create({ model: 'no-such-model', messages, max_tokens: 4 }),
    OpenAI.NotFoundError, 404);
});

await step('temperature 5 -> 400 BadRequestError naming temperature', async () => {
  const e = await expectApiError(
    client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 5 }),
    OpenAI.BadRequestError, 400);
  check(/temperature/.test(e.error.message),
        `error.message does not name temperature: ${show(e.error.message)}`);
});

await step('n=2: two choices, index 0 and 1, seed + i each', async () => {
  const ask = (extra) => client.chat.completions.create({
    model, messages, max_tokens: 8, temperature: 1, ...extra,
  });
  const r = await ask({ n: 2, seed: 21 });
  check(r.choices.length === 2, `choices: ${show(r.choices)}`);
  r.choices.forEach((c, i) => {
    check(c.index === i, `choices[${i}].index is ${show(c.index)}`);
    check(c.message?.role === 'assistant', `choices[${i}].message: ${show(c.message)}`);
    check(['stop', 'length'].includes(c.finish_reason), `choices[${i}]: ${show(c.finish_reason)}`);
  });
  checkUsage(r.usage, 'usage', { maxCompletion: 16 });
  // Choice 1 is the lone request with seed 22.
  const one = await ask({ seed: 22 });
  check(one.choices[0].message.content === r.choices[1].message.content &&
        one.choices[0].message.reasoning_content === r.choices[1].message.reasoning_content,
        `seed 22 gave ${show(one.choices[0].message)}, choice 1 ${show(r.choices[1].message)}`);

  const stream = await ask({ n: 2, seed: 21, stream: true, stream_options: { include_usage: true } });
  const text = ['', ''];
  const finish = [null, null];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices || []) {
      check(c.index === 0 || c.index === 1, `chunk index ${show(c.index)}`);
      check(finish[c.index] === null, `choice ${c.index} has a chunk after its finish_reason`);
      text[c.index] += (c.delta?.reasoning_content || '') + (c.delta?.content || '');
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  check(finish.every((f) => ['stop', 'length'].includes(f)), `finish reasons ${show(finish)}`);
  r.choices.forEach((c, i) => {
    const whole = (c.message.reasoning_content || '') + (c.message.content || '');
    check(text[i] === whole, `streamed choice ${i} ${show(text[i])} != ${show(whole)}`);
  });
  check(usage && usage.completion_tokens === r.usage.completion_tokens &&
        usage.prompt_tokens === r.usage.prompt_tokens, `stream usage ${show(usage)}`);
});

await step('n=9 -> 400 BadRequestError naming n', async () => {
  const e = await expectApiError(
    client.chat.completions.create({ model, messages, max_tokens: 4, n: 9 }),
    OpenAI.BadRequestError, 400);
  check(/'n'/.test(e.error.message) && /8/.test(e.error.message),
        `error.message: ${show(e.error.message)}`);
  check(e.param === 'n' || e.error?.param === 'n', `param: ${show(e.param ?? e.error?.param)}`);
});

finish();
