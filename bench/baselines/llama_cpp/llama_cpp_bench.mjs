// llama.cpp (the prebuilt library inside the npm package node-llama-cpp, installed by `scripts/setup.sh --bench`
// with --ignore-scripts) decoding a GGUF file greedily from given token ids, for `make bench-generative`.
//
// Usage: node llama_cpp_bench.mjs MODEL.gguf SPEC.json
// SPEC: {"threads": 2, "greedy": [ids...], "greedy_tokens": 32,
//        "runs": [{"label": "1 sequence", "prompts": [[ids...]], "output_tokens": 256}, ...],
//        "ttft": [ids...]}
// Prints JSON: the greedy continuation, and per run: decode tokens/s (tokens generated after each sequence's
// first, over the time from the first sequence's first token to the last token), wall time, TTFT of `ttft`.
import fs from "node:fs";
import {getLlama} from "node-llama-cpp";

const [modelPath, specPath] = process.argv.slice(2);
const spec = JSON.parse(fs.readFileSync(specPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const now = () => Number(process.hrtime.bigint()) / 1e9;

// One sequence's greedy continuation of `prompt`: the tokens and when each came.
async function generate(sequence, prompt, n) {
  const out = [], times = [];
  const t0 = now();
  for await (const token of sequence.evaluate(prompt, {temperature: 0})) {
    out.push(token);
    times.push(now());
    if (out.length >= n) break;
  }
  return {tokens: out, start: t0, times};
}

async function run(prompts, outputTokens, threads) {
  const context = await model.createContext({contextSize: 4096, sequences: prompts.length, threads,
                                             batchSize: 512, flashAttention: false});
  try {
    const seqs = prompts.map(() => context.getSequence());
    const t0 = now();
    const results = await Promise.all(prompts.map((p, i) => generate(seqs[i], p, outputTokens)));
    const t1 = now();
    const firsts = results.map(r => r.times[0]);
    const decodeStart = Math.min(...firsts);
    const decoded = results.reduce((s, r) => s + r.tokens.length - 1, 0);
    return {sequences: prompts.length, output_tokens: results.reduce((s, r) => s + r.tokens.length, 0),
            wall_s: t1 - t0, ttft_s: Math.max(...firsts) - t0,
            decode_tokens_per_s: t1 > decodeStart ? decoded / (t1 - decodeStart) : 0, tokens: results.map(r => r.tokens)};
  } finally {
    await context.dispose();
  }
}

const threads = spec.threads ?? 2;
const report = {threads, system: llama.systemInfo};
if (spec.greedy) {
  const r = await run([spec.greedy], spec.greedy_tokens ?? 32, threads);
  report.greedy = r.tokens[0];
}
report.runs = [];
for (const r of spec.runs ?? []) {
  const res = await run(r.prompts, r.output_tokens, r.threads ?? threads);
  delete res.tokens;
  report.runs.push({label: r.label, threads: r.threads ?? threads, ...res});
}
if (spec.ttft) {
  const r = await run([spec.ttft], 1, threads);
  report.ttft_512_s = r.ttft_s;
}
await model.dispose();
console.log(JSON.stringify(report));
