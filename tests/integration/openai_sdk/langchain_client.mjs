// LangChain's ChatOpenAI (a framework built on the official OpenAI SDK) against inferd, run by
// suite_generative.py: invoke, stream and batch. Prints one JSON object with the texts.
// Usage: node langchain_client.mjs BASE_URL MODEL QUESTION
import { ChatOpenAI } from "@langchain/openai";
import { HumanMessage, SystemMessage } from "@langchain/core/messages";

const [baseURL, model, question] = process.argv.slice(2);
const llm = new ChatOpenAI({
  model, temperature: 0, maxTokens: 20, apiKey: "not-needed", configuration: { baseURL }, maxRetries: 0,
});
const out = {};
out.invoke = (await llm.invoke([new HumanMessage(question)])).content;
let streamed = "";
for await (const chunk of await llm.stream([new HumanMessage(question)])) streamed += chunk.content;
out.stream = streamed;
const batch = await llm.batch([[new HumanMessage(question)], [new SystemMessage("Be brief."), new HumanMessage(question)]]);
out.batch = batch.map((m) => m.content);
console.log(JSON.stringify(out));
