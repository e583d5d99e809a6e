// Constrained decoding through the real gateway, checked by an independent
// validator (ajv): from the random-weights tiny model, every reply under a
// response_format json_schema parses and validates, over many seeds; a
// forced tool call carries arguments valid for the tool's parameters.
// usage: node schema_replies.mjs HOST:PORT
import Ajv from "ajv";

import { chat as chatOn, check, finish } from "./gateway_checks.mjs";

const ajv = new Ajv({ strict: false });
const chat = (body) => chatOn(process.argv[2], body);

const schema = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 10 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    color: { enum: ["red", "green", "blue"] },
    tags: { type: "array", items: { type: "boolean" }, maxItems: 3 },
  },
  required: ["name", "age", "color"],
  additionalProperties: false,
};
const validate = ajv.compile(schema);
const messages = [{ role: "user", content: "Describe a person as JSON." }];

let valid = 0;
const seeds = 16;
for (let seed = 1; seed <= seeds; seed++) {
  const { status, json } = await chat({
    messages,
    seed,
    temperature: 1,
    max_tokens: seed % 2 ? 60 : 300, // tight budgets close in time
    thinking: seed % 4 === 0,
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema } },
  });
  const content = json?.choices?.[0]?.message?.content ?? "";
  let value;
  try {
    value = JSON.parse(content);
  } catch {
    value = undefined;
  }
  const ok = status === 200 && value !== undefined && validate(value);
  if (ok) valid++;
  else console.log(`seed ${seed}: status ${status} finish ${json?.choices?.[0]?.finish_reason} content ${JSON.stringify(content)} ${JSON.stringify(validate.errors)}`);
}
check(valid === seeds, `json_schema replies valid under ajv: ${valid}/${seeds}`);

const objectReply = await chat({ messages, seed: 3, temperature: 1, max_tokens: 80, response_format: { type: "json_object" } });
let obj;
try {
  obj = JSON.parse(objectReply.json?.choices?.[0]?.message?.content ?? "");
} catch {}
check(objectReply.status === 200 && obj !== null && typeof obj === "object" && !Array.isArray(obj), "json_object reply is a JSON object");

const parameters = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "days"],
};
const validArgs = ajv.compile(parameters);
let toolOk = 0;
for (let seed = 1; seed <= 6; seed++) {
  const { status, json } = await chat({
    messages: [{ role: "user", content: "Weather?" }],
    seed,
    temperature: 1,
    max_tokens: 400,
    thinking: false,
    tools: [{ type: "function", function: { name: "get_weather", parameters } }],
    tool_choice: { type: "function", function: { name: "get_weather" } },
    parallel_tool_calls: false,
  });
  const calls = json?.choices?.[0]?.message?.tool_calls ?? [];
  let args;
  try {
    args = JSON.parse(calls[0]?.function?.arguments ?? "");
  } catch {}
  if (status === 200 && calls.length === 1 && calls[0].function.name === "get_weather" && args && validArgs(args)) toolOk++;
  else console.log(`tool seed ${seed}: ${status} ${JSON.stringify(json).slice(0, 400)}`);
}
check(toolOk === 6, `named tool_choice: one get_weather call with valid arguments: ${toolOk}/6`);

const bad = await chat({
  messages,
  response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", format: "email" } } },
});
check(bad.status === 400 && JSON.stringify(bad.json).includes("format"), "unsupported keyword: 400 naming it");
const undefinedName = await chat({
  messages,
  tools: [{ type: "function", function: { name: "f" } }],
  tool_choice: { type: "function", function: { name: "g" } },
});
check(undefinedName.status === 400, "tool_choice naming an undefined function: 400");
const malformed = await chat({ messages, tools: [{ type: "function", function: {} }] });
check(malformed.status === 400, "malformed tools entry: 400");
finish();
