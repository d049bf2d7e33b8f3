// The official `@anthropic-ai/sdk` npm client against a real `minfer serve` (node's built-in test runner):
// messages plain and streamed (the SDK's stream helper assembles the same message at temperature 0), count_tokens
// equal to usage.input_tokens, a forced tool call and its tool_result round trip, and errors as the SDK's typed
// exceptions.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import Anthropic from '@anthropic-ai/sdk';

import { startServer, stopServer } from './server.mjs';

let server;
let client;
const model = 'm';

const weather = {
  name: 'get_weather',
  description: 'Current weather in a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 20 } },
    required: ['city'],
    additionalProperties: false,
  },
};

before(async () => {
  const started = await startServer(['--served-model-name', model]);
  server = started.proc;
  client = new Anthropic({ baseURL: started.url, apiKey: 'not-needed', maxRetries: 0, timeout: 120_000 });
});

after(async () => {
  if (server) await stopServer(server);
});

test('messages, plain and streamed, agree at temperature 0', async () => {
  const params = { model, max_tokens: 12, messages: [{ role: 'user', content: 'Say hello.' }], temperature: 0 };
  const whole = await client.messages.create(params);
  assert.equal(whole.type, 'message');
  assert.equal(whole.role, 'assistant');
  assert.equal(whole.content[0].type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(whole.stop_reason), whole.stop_reason);
  const count = await client.messages.countTokens({ model, messages: params.messages });
  assert.equal(count.input_tokens, whole.usage.input_tokens + (whole.usage.cache_read_input_tokens ?? 0));
  const stream = client.messages.stream(params);
  const seen = [];
  stream.on('streamEvent', (event) => seen.push(event.type));
  const final = await stream.finalMessage();
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(seen[0], 'message_start');
  assert.equal(seen[seen.length - 1], 'message_stop');
});

test('a forced tool call, then its result', async () => {
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  const reply = await client.messages.create({
    model, max_tokens: 60, messages, tools: [weather], tool_choice: { type: 'tool', name: 'get_weather' },
  });
  assert.equal(reply.stop_reason, 'tool_use');
  const call = reply.content.find((b) => b.type === 'tool_use');
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof call.input.city, 'string');
  assert.ok(call.input.city.length <= 20);
  const final = await client.messages.create({
    model,
    max_tokens: 8,
    temperature: 0,
    tools: [weather],
    messages: [
      ...messages,
      { role: 'assistant', content: [call] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '21 C and sunny' }] },
    ],
  });
  assert.equal(final.content[0].type, 'text');
});

test('errors are the SDK typed exceptions', async () => {
  await assert.rejects(
    client.messages.create({ model, messages: [{ role: 'user', content: 'Hi' }] }),
    (err) => err instanceof Anthropic.BadRequestError && err.status === 400 && /max_tokens/.test(err.message),
  );
  await assert.rejects(
    client.messages.create({ model: 'no-such-model', max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] }),
    (err) => err instanceof Anthropic.NotFoundError && err.status === 404,
  );
});
