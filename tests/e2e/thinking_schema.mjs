// Thinking mode under response_format json_schema, through the real gateway
// on the random-weights tiny model: the constraint applies to the response
// channel only. Over several seeds every reply's content parses and
// validates under ajv, and its reasoning_content is present and free (not
// shaped by the schema: not JSON, and mostly starting where no JSON value
// can).
// usage: node thinking_schema.mjs HOST:PORT
import Ajv from "ajv";

import { chat as chatOn, check, finish } from "./gateway_checks.mjs";

const ajv = new Ajv({ strict: false });
const chat = (body) => chatOn(process.argv[2], body);

const schema = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 8 },
    days: { type: "integer", minimum: 1, maximum: 9 },
    sunny: { type: "boolean" },
  },
  required: ["city", "days"],
  additionalProperties: false,
};
const validate = ajv.compile(schema);
const messages = [{ role: "user", content: "Plan a trip; answer as JSON." }];
const parses = (text) => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};
// Where a JSON value may start (after any whitespace).
const jsonStart = /^\s*[{["\-0-9tfn]/;

const seeds = 8;
let valid = 0;
let reasoned = 0;
let free = 0;
let unlikeJson = 0;
for (let seed = 1; seed <= seeds; seed++) {
  const request = { messages, seed, temperature: 1, max_tokens: 120, thinking: true };
  const constrained = await chat({
    ...request,
    response_format: { type: "json_schema", json_schema: { name: "trip", strict: true, schema } },
  });
  const message = constrained.json?.choices?.[0]?.message ?? {};
  const content = message.content ?? "";
  const reasoning = message.reasoning_content ?? "";
  let value;
  try {
    value = JSON.parse(content);
  } catch {
    value = undefined;
  }
  const ok = constrained.status === 200 && value !== undefined && validate(value);
  if (ok) valid++;
  else console.log(`seed ${seed}: status ${constrained.status} content ${JSON.stringify(content)} ${JSON.stringify(validate.errors)}`);
  if (reasoning.length > 0) reasoned++;
  else console.log(`seed ${seed}: no reasoning_content: ${JSON.stringify(constrained.json).slice(0, 400)}`);
  // Free text: not a JSON document (the schema's grammar could not have written it).
  if (reasoning.length > 0 && !parses(reasoning)) free++;
  if (!jsonStart.test(reasoning)) unlikeJson++;
}
check(valid === seeds, `thinking + json_schema: content valid under ajv: ${valid}/${seeds}`);
check(reasoned === seeds, `reasoning_content present: ${reasoned}/${seeds}`);
check(free === seeds, `reasoning_content is free text, not JSON: ${free}/${seeds}`);
// A random model starts a JSON value by chance now and then, not every time.
check(unlikeJson >= seeds / 2, `reasoning_content starts where no JSON value can: ${unlikeJson}/${seeds}`);
finish();
