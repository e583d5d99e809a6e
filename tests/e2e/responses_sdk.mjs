// End-to-end check of POST /v1/responses through OpenAI's own clients
// (pinned in package-lock.json): the `openai` npm client (responses.create,
// the responses.stream helper, a function-tool round trip with
// function_call_output, structured output, refusals) and `@openai/agents`
// (an Agent with one function tool runs a turn that calls the tool and
// finishes), plus the same tokens as chat completions for the same seed.
//
//   cd tests/e2e && npm ci && node responses_sdk.mjs HOST:PORT
//
// The address comes from the first argument or env K3_HTTP (the fields of
// run-local.sh's READY line are accepted as they are); the API key from env
// K3_API_KEY (default "none"). The synthetic model writes random text: the
// checks look at the API's shape and at what the constraint engine enforces
// (tool calls, JSON), never at what the text says.
// Prints one line per check and "N passed, N failed"; exits 1 on a failure.
import OpenAI from 'openai';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { check, finish, show, step } from './check_runner.mjs';

function httpAddress() {
  let addr = process.env.K3_HTTP || '';
  for (const arg of process.argv.slice(2)) {
    if (arg.startsWith('http=')) addr = arg.slice(5);
    else if (!arg.includes('=')) addr = arg;
  }
  if (!addr) {
    console.error('usage: node responses_sdk.mjs HOST:PORT   (or env K3_HTTP=HOST:PORT)');
    process.exit(2);
  }
  return addr.replace(/^https?:\/\//, '').replace(/\/+$/, '');
}

const baseURL = `http://${httpAddress()}/v1`;
const apiKey = process.env.K3_API_KEY || 'none';
const client = new OpenAI({
  baseURL,
  apiKey,
  maxRetries: 0, // a retry would hide a failure
  timeout: Number(process.env.K3_E2E_TIMEOUT_MS || 300000),
});


// A response object's shape, its usage adding up.
function checkResponse(r, where, { maxOutput } = {}) {
  check(r.object === 'response', `${where}: object ${show(r.object)}`);
  check(typeof r.id === 'string' && r.id.startsWith('resp_'), `${where}: id ${show(r.id)}`);
  check(['completed', 'incomplete'].includes(r.status), `${where}: status ${show(r.status)}`);
  if (r.status === 'incomplete')
    check(r.incomplete_details?.reason === 'max_output_tokens',
          `${where}: incomplete_details ${show(r.incomplete_details)}`);
  const u = r.usage;
  check(u && Number.isInteger(u.input_tokens) && u.input_tokens > 0, `${where}: usage ${show(u)}`);
  check(Number.isInteger(u.output_tokens) && u.output_tokens > 0, `${where}: usage ${show(u)}`);
  check(u.total_tokens === u.input_tokens + u.output_tokens, `${where}: total ${show(u)}`);
  check(Number.isInteger(u.input_tokens_details?.cached_tokens), `${where}: cached ${show(u)}`);
  const reasoning = u.output_tokens_details?.reasoning_tokens;
  check(Number.isInteger(reasoning) && reasoning <= u.output_tokens, `${where}: reasoning ${show(u)}`);
  if (maxOutput !== undefined)
    check(u.output_tokens <= maxOutput, `${where}: ${u.output_tokens} > max_output_tokens ${maxOutput}`);
  check(Array.isArray(r.output), `${where}: output ${show(r.output)}`);
}

const weatherParameters = {
  type: 'object',
  // An enum keeps the random model's arguments short (a free string runs on).
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } },
  required: ['city'],
  additionalProperties: false,
};
const weatherTool = { type: 'function', name: 'get_weather', description: 'The weather in a city',
                      parameters: weatherParameters, strict: true };
const noThinking = { effort: 'none' };

const models = await client.models.list();
const model = models.data[0].id;

await step('responses.create: a string input, thinking off', async () => {
  const r = await client.responses.create({ model, input: 'Say hello.', reasoning: noThinking,
                                            max_output_tokens: 8 });
  checkResponse(r, 'create', { maxOutput: 8 });
  check(r.output.every((item) => item.type === 'message'), `items ${show(r.output)}`);
  check(r.output[0]?.content?.[0]?.type === 'output_text', `content ${show(r.output)}`);
  check(typeof r.output_text === 'string' && r.output_text.length > 0, `output_text ${show(r.output_text)}`);
  check(r.usage.output_tokens_details.reasoning_tokens === 0, `reasoning tokens ${show(r.usage)}`);
});

await step('responses.create: thinking on by default, reasoning kept apart from text', async () => {
  const r = await client.responses.create({ model, instructions: 'Think first.', input: 'Hi',
                                            max_output_tokens: 12 });
  checkResponse(r, 'thinking', { maxOutput: 12 });
  check(r.output.length > 0 && r.output[0].type === 'reasoning', `items ${show(r.output)}`);
  check(r.output[0].content?.[0]?.type === 'reasoning_text', `reasoning ${show(r.output[0])}`);
  check(r.usage.output_tokens_details.reasoning_tokens > 0, `reasoning tokens ${show(r.usage)}`);
  check(r.reasoning?.effort === null, `echoed reasoning ${show(r.reasoning)}`);
});

await step('responses.stream: the event sequence, the helper\'s final response', async () => {
  const stream = client.responses.stream({ model, input: 'Answer in JSON.', reasoning: noThinking,
    text: { format: { type: 'json_schema', name: 'answer', strict: true,
                      schema: { type: 'object', properties: { ok: { type: 'boolean' } },
                                required: ['ok'], additionalProperties: false } } } });
  const types = [];
  let text = '';
  stream.on('response.output_text.delta', (e) => { text += e.delta; });
  for await (const event of stream) types.push(event.type);
  const final = await stream.finalResponse();
  check(types[0] === 'response.created' && types[1] === 'response.in_progress', `first ${show(types)}`);
  check(types.at(-1) === 'response.completed', `last ${show(types.slice(-3))}`);
  for (const t of ['response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
                   'response.output_text.done', 'response.output_item.done'])
    check(types.includes(t), `no ${t} in ${show(types)}`);
  checkResponse(final, 'stream final');
  check(final.status === 'completed', `status ${final.status}`);
  const message = final.output.find((item) => item.type === 'message');
  const finalText = message?.content?.[0]?.text;
  check(finalText === text, `final text ${show(finalText)} != deltas ${show(text)}`);
  const parsed = JSON.parse(text);
  check(typeof parsed.ok === 'boolean', `schema not kept: ${show(text)}`);
});

await step('responses.stream: a cut answer ends with response.incomplete', async () => {
  const stream = client.responses.stream({ model, input: 'Tell a long story.', max_output_tokens: 6 });
  const types = [];
  let last;
  for await (const event of stream) {
    types.push(event.type);
    last = event;
  }
  check(last?.type === 'response.incomplete', `last ${show(types.slice(-3))}`);
  checkResponse(last.response, 'incomplete', { maxOutput: 6 });
  check(last.response.status === 'incomplete', `status ${last.response.status}`);
  // A cut think channel is still a reasoning item.
  check(last.response.output[0]?.type === 'reasoning', `items ${show(last.response.output)}`);
  check(types.includes('response.reasoning_text.delta'), `no reasoning deltas in ${show(types)}`);
});

await step('function tool round trip: function_call, then function_call_output', async () => {
  const input = [{ role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] }];
  // A required call leaves the text before it room to run up to the limit:
  // the constraint closes it in time for the call.
  const first = await client.responses.create({ model, input, tools: [weatherTool], tool_choice: 'required',
                                                parallel_tool_calls: false, reasoning: noThinking,
                                                max_output_tokens: 200, seed: 7 });
  checkResponse(first, 'first turn');
  check(first.status === 'completed', `status ${first.status}`);
  const calls = first.output.filter((item) => item.type === 'function_call');
  check(calls.length >= 1, `no function_call in ${show(first.output)}`);
  const call = calls[0];
  check(call.name === 'get_weather' && call.call_id.startsWith('call_'), `call ${show(call)}`);
  const args = JSON.parse(call.arguments);
  check(typeof args.city === 'string', `arguments ${show(call.arguments)}`);
  // Send the history back (the items as they came) with the tool's output.
  const second = await client.responses.create({
    model, tools: [weatherTool], tool_choice: 'none', reasoning: noThinking, max_output_tokens: 10,
    input: [...input, ...first.output,
            ...calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: '{"temp_c": 21}' }))],
  });
  checkResponse(second, 'second turn', { maxOutput: 10 });
  check(second.output.every((item) => item.type === 'message'), `items ${show(second.output)}`);
  check(second.usage.input_tokens > first.usage.input_tokens, `input ${show(second.usage)}`);
  // The history sent back continues what the first turn ran (state reused).
  check(second.usage.input_tokens_details.cached_tokens > 0, `nothing reused: ${show(second.usage)}`);
});

await step('function tool streamed: arguments deltas and done', async () => {
  const stream = client.responses.stream({ model, input: 'Weather in Oslo?', tools: [weatherTool],
                                           tool_choice: { type: 'function', name: 'get_weather' },
                                           parallel_tool_calls: false, reasoning: noThinking,
                                           max_output_tokens: 200, seed: 7 });
  let args = '';
  let done;
  stream.on('response.function_call_arguments.delta', (e) => { args += e.delta; });
  stream.on('response.function_call_arguments.done', (e) => { done = e.arguments; });
  const final = await stream.finalResponse();
  check(done === args && typeof JSON.parse(args).city === 'string', `arguments ${show(args)} / ${show(done)}`);
  const calls = final.output.filter((item) => item.type === 'function_call');
  check(calls.length === 1 && calls[0].arguments === args, `items ${show(final.output)}`);
});

await step('same seed: /v1/responses and /v1/chat/completions give the same tokens', async () => {
  const sampling = { temperature: 1.0, seed: 4242 };
  const chat = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Name a colour.' }],
    reasoning_effort: 'none', max_tokens: 12, ...sampling });
  const resp = await client.responses.create({
    model, instructions: 'Be brief.', input: 'Name a colour.', reasoning: noThinking, max_output_tokens: 12,
    ...sampling });
  const text = chat.choices[0].message.content;
  check(text.length > 0, 'chat said nothing');
  check(resp.output_text === text, `responses ${show(resp.output_text)} != chat ${show(text)}`);
  check(resp.usage.input_tokens === chat.usage.prompt_tokens, `prompt ${show(resp.usage)} / ${show(chat.usage)}`);
  check(resp.usage.output_tokens === chat.usage.completion_tokens, `output ${show(resp.usage)} / ${show(chat.usage)}`);
});

await step('refusals by name: previous_response_id, a stored response', async () => {
  try {
    await client.responses.create({ model, input: 'x', previous_response_id: 'resp_123' });
    check(false, 'previous_response_id was accepted');
  } catch (e) {
    check(e.status === 400 && e.param === 'previous_response_id', `${e.status} ${e.param} ${e.message}`);
  }
  try {
    await client.responses.retrieve('resp_123');
    check(false, 'a stored response was found');
  } catch (e) {
    check(e.status === 404 && /keeps no responses/.test(e.message), `${e.status} ${e.message}`);
  }
});

await step('@openai/agents: an agent calls its function tool and finishes', async () => {
  setTracingDisabled(true);
  const seen = [];
  const getWeather = tool({
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: z.object({ city: z.enum(['Paris', 'Oslo']) }),
    execute: async ({ city }) => {
      seen.push(city);
      return `sunny in ${city}`;
    },
  });
  const agent = new Agent({
    name: 'Weather agent',
    instructions: 'Answer with the weather tool.',
    model,
    tools: [getWeather],
    // The first turn must call the tool; the SDK resets tool_choice after it
    // (resetToolChoice), so the next turn answers in text.
    // The seed keeps the random model's text short and the test's time steady.
    modelSettings: { toolChoice: 'required', parallelToolCalls: false, reasoning: { effort: 'none' },
                     maxTokens: 200, providerData: { seed: 7 } },
  });
  const runner = new Runner({ modelProvider: new OpenAIProvider({ baseURL, apiKey, useResponses: true }),
                              tracingDisabled: true });
  const result = await runner.run(agent, 'What is the weather in Paris?', { maxTurns: 4 });
  check(seen.length >= 1, 'the tool was never called');
  const items = result.newItems.map((i) => i.type);
  check(items.includes('tool_call_item') && items.includes('tool_call_output_item'), `items ${show(items)}`);
  check(typeof result.finalOutput === 'string' && result.finalOutput.length > 0,
        `final output ${show(result.finalOutput)}`);
  check(result.rawResponses.length >= 2, `model calls ${result.rawResponses.length}`);
});

finish();
