// llama.cpp's side of bench/llamacpp_compare.sh: the same measurements `minfer generate` and `minfer bench
// offline` make, on the same GGUF file, through node-llama-cpp (llama.cpp's CPU backend built for every x86
// variant, the best one picked at run time, as llama.cpp's own release binaries do).
//   node bench.mjs MODEL.gguf THREADS DECODE_PROMPT_IDS DECODE_TOKENS PREFILL_IDS CONCURRENCY DECODE_STEPS
// DECODE_PROMPT_IDS and PREFILL_IDS are comma-separated token ids. Prints one JSON object per line:
//   {"what":"decode","tokens":N,"steps":N-1,"seconds":S,"ids":[...]}   greedy, batch 1
//   {"what":"prefill","tokens":N,"seconds":S}                         best of 3
//   {"what":"concurrent","sequences":C,"steps":K,"seconds":S}          C sequences decoding together
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, threadsArg, decodePrompt, decodeTokensArg, prefillIds, concurrencyArg, stepsArg] =
    process.argv.slice(2);
const threads = Number(threadsArg);
const ids = (s) => s.split(",").map(Number);
const print = (o) => console.log(JSON.stringify(o));

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});

// Greedy decode at batch 1: the time from the first generated token to the last is DECODE_TOKENS - 1 steps.
{
  const context = await model.createContext({contextSize: 1024, batchSize: 512, threads, sequences: 1});
  const sequence = context.getSequence();
  const out = [];
  let first = 0;
  for await (const token of sequence.evaluate(ids(decodePrompt), {temperature: 0})) {
    if (out.length === 0) first = performance.now();
    out.push(token);
    if (out.length >= Number(decodeTokensArg)) break;
  }
  const seconds = (performance.now() - first) / 1000;
  print({what: "decode", tokens: out.length, steps: out.length - 1, seconds, ids: out});

  // Prefill: one prompt through a fresh history, logits of its last position only; best of 3.
  const prompt = ids(prefillIds);
  let best = Infinity;
  for (let round = 0; round < 3; ++round) {
    await sequence.clearHistory();
    const t0 = performance.now();
    await sequence.evaluateWithoutGeneratingNewTokens(prompt);
    best = Math.min(best, (performance.now() - t0) / 1000);
  }
  print({what: "prefill", tokens: prompt.length, seconds: best});
  await context.dispose();
}

// C sequences with 16-token prompts; once every one has its first token, time DECODE_STEPS steps of all of them
// (node-llama-cpp gathers the sequences' pending tokens into one llama_decode batch).
for (const c of concurrencyArg.split(",").map(Number)) {
  const steps = Number(stepsArg);
  const context = await model.createContext({contextSize: 64 * c, batchSize: 512, threads, sequences: c});
  let started = 0;
  let release;
  const allStarted = new Promise((resolve) => (release = resolve));
  let t0 = 0;
  const runs = [];
  for (let s = 0; s < c; ++s) {
    const sequence = context.getSequence();
    const prompt = Array.from({length: 16}, (_, i) => 1000 + 37 * s + 11 * i);
    runs.push((async () => {
      let n = 0;
      for await (const _ of sequence.evaluate(prompt, {temperature: 0})) {
        if (n === 0 && ++started === c) {
          t0 = performance.now();
          release();
        }
        if (n === 0) await allStarted;
        if (++n > steps) break;
      }
    })());
  }
  await Promise.all(runs);
  print({what: "concurrent", sequences: c, steps, seconds: (performance.now() - t0) / 1000});
  await context.dispose();
}
await model.dispose();
await llama.dispose();
