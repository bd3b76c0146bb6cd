// The official OpenAI Node SDK naming a LoRA adapter as its model (run by suite_lora.py and shown in
// docs/generative.md). Prints one JSON object: the model list (id -> parent) and a chat answer.
// Usage: node lora_client.mjs BASE_URL ADAPTER QUESTION
import OpenAI from "openai";

const [baseURL, adapter, question] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "not-needed", maxRetries: 0, timeout: 60000 });
const models = await client.models.list();
const chat = await client.chat.completions.create({
  model: adapter, messages: [{ role: "user", content: question }], max_tokens: 16, temperature: 0,
});
const out = {
  models: Object.fromEntries(models.data.map((m) => [m.id, m.parent ?? null])),
  model: chat.model,
  text: chat.choices[0].message.content,
  finish: chat.choices[0].finish_reason,
  usage: chat.usage,
};
try {
  await client.chat.completions.create({ model: "no-such-adapter", messages: [{ role: "user", content: "hi" }] });
} catch (e) {
  out.not_found = { status: e.status, message: e.error?.message ?? e.message };
}
console.log(JSON.stringify(out));
