// The official `openai` npm client against a real `minfer serve` (node's built-in test runner: `node --test`).
// The server is started here on a free loopback port: MINFER_BIN is the binary (default: the release build),
// MINFER_TEST_MODEL an optional model to serve (default: the built-in demo model).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import OpenAI from 'openai';
import { zodFunction, zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';

import { startServer, stopServer } from './server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

let server;
let client;
let model;

before(async () => {
  const started = await startServer([]);
  server = started.proc;
  client = new OpenAI({ baseURL: `${started.url}/v1`, apiKey: 'not-needed', maxRetries: 0, timeout: 120_000 });
  const models = await client.models.list();
  assert.ok(models.data.length >= 1, 'GET /v1/models lists the served model');
  model = models.data[0].id;
});

after(async () => {
  if (server) await stopServer(server);
});

test('completions', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].index, 0);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 6, JSON.stringify(r.usage));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('streaming completions equal the non-streamed text at temperature 0', async () => {
  const params = { model, prompt: 'The river', max_tokens: 8, temperature: 0, ignore_eos: true };
  const whole = await client.completions.create(params);
  const stream = await client.completions.create({ ...params, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, 'length');
});

test('chat completions', async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [
      { role: 'system', content: 'You are a terse assistant.' },
      { role: 'user', content: 'Say hello.' },
    ],
    max_tokens: 6,
    temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens >= 1);
});

test('streaming chat with usage', async () => {
  const params = {
    model,
    messages: [{ role: 'user', content: 'Tell me a story.' }],
    max_tokens: 8,
    temperature: 0,
    ignore_eos: true,
  };
  const whole = await client.chat.completions.create(params);
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let role = null;
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 2, `streamed in ${chunks} chunk(s)`);
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.ok(usage, 'stream_options.include_usage sends a usage chunk');
  assert.equal(usage.completion_tokens, 8);
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('a 400 surfaces as openai.BadRequestError naming the field', async () => {
  await assert.rejects(
    client.completions.create({ model, prompt: 'x', max_tokens: -1 }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.status, 400);
      assert.match(err.message, /max_tokens/);
      return true;
    },
  );
  await assert.rejects(
    client.chat.completions.create({ model, messages: 'not a list', max_tokens: 4 }),
    (err) => err instanceof OpenAI.BadRequestError && err.status === 400 && /messages/.test(err.message),
  );
});

test('an unknown model surfaces as openai.NotFoundError', async () => {
  await assert.rejects(
    client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 2 }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404,
  );
});

test('the server still serves after the errors', async () => {
  const r = await client.completions.create({ model, prompt: 'again', max_tokens: 2, temperature: 0 });
  assert.equal(r.choices.length, 1);
});

// Structured outputs through the client's own helpers: a zod schema becomes response_format json_schema (strict),
// and .parse() validates the answer against it.
test('structured outputs: parse() with a zod schema at temperature 1', async () => {
  const Person = z.object({ name: z.string().max(16), age: z.number().int().min(0).max(120) });
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.parse({
      model,
      messages: [{ role: 'user', content: 'Invent a person.' }],
      response_format: zodResponseFormat(Person, 'person'),
      temperature: 1,
      seed,
      max_tokens: 100,
    });
    const parsed = r.choices[0].message.parsed;
    assert.ok(parsed, JSON.stringify(r.choices[0]));
    assert.ok(Number.isInteger(parsed.age) && parsed.age >= 0 && parsed.age <= 120, JSON.stringify(parsed));
    assert.ok(parsed.name.length <= 16);
  }
});

test('tools: tool_choice required with zodFunction, whole and streamed', async () => {
  const tools = [zodFunction({ name: 'get_weather', parameters: z.object({ city: z.string().max(20) }) })];
  const params = {
    model,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools,
    tool_choice: 'required',
    parallel_tool_calls: false,  // one call: a sampled array of calls could run past max_tokens
    max_tokens: 80,
    temperature: 1,
  };
  const r = await client.chat.completions.parse(params);
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  assert.equal(typeof call.function.parsed_arguments.city, 'string');
  const stream = client.chat.completions.stream(params);
  const final = await stream.finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(final.choices[0].message.tool_calls[0].function.name, 'get_weather');
  assert.equal(typeof JSON.parse(final.choices[0].message.tool_calls[0].function.arguments).city, 'string');
});

// Reasoning: a second server with Qwen3's chat template (it knows <think> blocks); the output is held to a
// reasoning block and an answer by a regex, so the small model's text is fixed and the split is what is tested.
test('reasoning_content split from <think>, whole and streamed', async () => {
  const template = path.resolve(here, '../../data/chat_templates/qwen3.jinja');
  const started = await startServer(['--chat-template', template]);
  try {
    const c = new OpenAI({ baseURL: `${started.url}/v1`, apiKey: 'not-needed', maxRetries: 0, timeout: 120_000 });
    const params = {
      model: (await c.models.list()).data[0].id,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 100,
      structured_outputs: { regex: '<think>\\nLet me think\\.\\n</think>\\n\\nHello!' },
    };
    const whole = await c.chat.completions.create(params);
    assert.equal(whole.choices[0].message.content, 'Hello!');
    assert.equal(whole.choices[0].message.reasoning_content.trim(), 'Let me think.');
    let reasoning = '';
    let content = '';
    for await (const chunk of await c.chat.completions.create({ ...params, stream: true })) {
      const delta = chunk.choices[0]?.delta ?? {};
      reasoning += delta.reasoning_content ?? '';
      content += delta.content ?? '';
    }
    assert.equal(reasoning.trim(), 'Let me think.');
    assert.equal(content, 'Hello!');
  } finally {
    await stopServer(started.proc);
  }
});

// The Responses API through the client's own helpers: create, stream (the helper assembles the response create
// returns at temperature 0), parse with a zod schema, a function-call round trip through previous_response_id, and
// retrieval and deletion of the stored response.
test('responses: create and stream agree at temperature 0', async () => {
  const params = { model, input: 'Tell me a story.', max_output_tokens: 8, temperature: 0 };
  const whole = await client.responses.create(params);
  assert.equal(whole.object, 'response');
  assert.equal(whole.output[0].type, 'message');
  const stream = client.responses.stream(params);
  const final = await stream.finalResponse();
  const text = (r) => r.output.filter((i) => i.type === 'message').flatMap((i) => i.content).map((c) => c.text).join('');
  assert.equal(text(final), whole.output_text);
  assert.equal(final.status, whole.status);
});

test('responses: parse() with a zod schema', async () => {
  const Person = z.object({ name: z.string().max(16), age: z.number().int().min(0).max(120) });
  const r = await client.responses.parse({
    model, input: 'Invent a person.', max_output_tokens: 100, temperature: 1, text: { format: zodTextFormat(Person, 'person') },
  });
  assert.ok(Number.isInteger(r.output_parsed.age) && r.output_parsed.age <= 120, JSON.stringify(r.output_parsed));
});

test('responses: a function call round trip, retrieval and deletion', async () => {
  const tool = {
    type: 'function', name: 'get_weather', description: 'Current weather in a city', strict: false,
    parameters: {
      type: 'object', properties: { city: { type: 'string', maxLength: 20 } }, required: ['city'],
      additionalProperties: false,  // the forced arguments then fit in max_output_tokens
    },
  };
  const first = await client.responses.create({
    model, input: 'Weather in Paris?', tools: [tool], tool_choice: { type: 'function', name: 'get_weather' },
    max_output_tokens: 60, temperature: 0,
  });
  const call = first.output.find((item) => item.type === 'function_call');
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.arguments).city, 'string');
  const second = await client.responses.create({
    model, previous_response_id: first.id, tools: [tool], max_output_tokens: 8, temperature: 0,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '21 C and sunny' }],
  });
  assert.equal(second.previous_response_id, first.id);
  assert.equal((await client.responses.retrieve(second.id)).output_text, second.output_text);
  await client.responses.delete(second.id);
  await assert.rejects(client.responses.retrieve(second.id), (err) => err instanceof OpenAI.NotFoundError);
});
