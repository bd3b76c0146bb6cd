// ONNX Runtime baseline for bench/onnx_bench.py: the same .onnx file through
// onnxruntime-node (the npm package bundles libonnxruntime), in-process, with
// a fixed intra-op thread count. Prints one JSON row per batch size.
//
//   node ort_bench.js MODEL.onnx INPUT_SHAPE(without batch, comma) THREADS BATCHES(comma) SECONDS
//   e.g. node ort_bench.js resnet18.onnx 3,224,224 2 1,2,4,8 3
// Inputs are random FP32 (or INT64 token ids when the shape starts with "i:").
"use strict";
const ort = require("onnxruntime-node");

async function main() {
  const [model, shapeArg, threadsArg, batchesArg, secondsArg] = process.argv.slice(2);
  const ints = shapeArg.startsWith("i:");
  const shape = (ints ? shapeArg.slice(2) : shapeArg).split(",").map(Number);
  const threads = Number(threadsArg);
  const seconds = Number(secondsArg || "3");
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: "sequential", graphOptimizationLevel: "all",
  });
  const inputName = session.inputNames[0];
  for (const batch of batchesArg.split(",").map(Number)) {
    const dims = [batch, ...shape];
    const n = dims.reduce((a, b) => a * b, 1);
    let tensor;
    if (ints) {
      const data = new BigInt64Array(n);
      for (let i = 0; i < n; i++) data[i] = BigInt(i % 50);
      tensor = new ort.Tensor("int64", data, dims);
    } else {
      const data = new Float32Array(n);
      for (let i = 0; i < n; i++) data[i] = Math.sin(i) * 0.5;
      tensor = new ort.Tensor("float32", data, dims);
    }
    const feeds = { [inputName]: tensor };
    const warm = Date.now();
    while (Date.now() - warm < 1000) await session.run(feeds);
    const lat = [];
    const t0 = process.hrtime.bigint();
    let elapsed = 0;
    while (elapsed < seconds) {
      const s = process.hrtime.bigint();
      await session.run(feeds);
      const e = process.hrtime.bigint();
      lat.push(Number(e - s) / 1000);
      elapsed = Number(e - t0) / 1e9;
    }
    lat.sort((a, b) => a - b);
    console.log(JSON.stringify({
      label: "onnxruntime", batch_size: batch, threads, calls: lat.length,
      inferences_per_s: (lat.length * batch) / elapsed, p50_us: lat[Math.floor(lat.length / 2)],
    }));
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
