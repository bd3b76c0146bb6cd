// The official OpenAI Node SDK against inferd (run by suite_generative.py): the calls a LangChain-style app makes,
// streaming and not. Prints one JSON object with what came back; the suite compares it with the reference.
// Usage: node client.mjs BASE_URL MODEL PROMPT QUESTION
import OpenAI from "openai";

const [baseURL, model, prompt, question] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "not-needed", maxRetries: 0, timeout: 60000 });
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: question }], max_tokens: 20, temperature: 0,
});
out.chat = { text: chat.choices[0].message.content, finish: chat.choices[0].finish_reason, usage: chat.usage };

const stream = await client.chat.completions.create({
  model, messages: [{ role: "user", content: question }], max_tokens: 20, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
let streamed = "";
let finish = null;
let usage = null;
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    streamed += c.delta?.content ?? "";
    finish = c.finish_reason ?? finish;
  }
  if (chunk.usage) usage = chunk.usage;
}
out.chat_stream = { text: streamed, finish, usage };

const completion = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0 });
out.completion = { text: completion.choices[0].text, finish: completion.choices[0].finish_reason };

const cstream = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0, stream: true });
let ctext = "";
for await (const chunk of cstream) ctext += chunk.choices[0]?.text ?? "";
out.completion_stream = ctext;

// Structured outputs as the SDK sends them (response_format json_schema, strict); the suite validates the answer.
const personSchema = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 10 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    pets: { type: "array", items: { enum: ["cat", "dog"] }, maxItems: 3 },
  },
  required: ["name", "age", "pets"],
  additionalProperties: false,
};
const structured = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "A person, as JSON" }], max_tokens: 200, seed: 7,
  response_format: { type: "json_schema", json_schema: { name: "person", schema: personSchema, strict: true } },
});
out.structured = { schema: personSchema, text: structured.choices[0].message.content,
                   finish: structured.choices[0].finish_reason };

try {
  await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] });
  out.not_found = "no error";
} catch (e) {
  out.not_found = { status: e.status, type: e.error?.type, message: e.message };
}
try {
  await client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], temperature: 9 });
  out.bad_request = "no error";
} catch (e) {
  out.bad_request = { status: e.status, type: e.error?.type };
}
console.log(JSON.stringify(out));
