// The greet kind: compose a greeting, then deliver it once per job. The same behaviour
// in every guest language (see the polyglot spec): this is the JavaScript one. Its input
// schema has the host refuse a submission without a non-empty string `name`; `compose`
// refuses such input itself too (the local runner does not check schemas).

import { InvalidInput, Retryable, defineKind } from '@spindle/guest';

/**
 * @typedef {{ name: string, flaky?: boolean, explode?: boolean }} GreetInput
 * @typedef {{ text: string }} Composed
 * @typedef {{ delivered: string, attempt: number }} Delivered
 */

/** The JSON Schema a job's input must follow; the host checks submissions against it. */
export const inputSchema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  title: 'GreetInput',
  description: 'Who to greet, and the failures to demonstrate.',
  type: 'object',
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1, description: 'who to greet' },
    flaky: { type: 'boolean', default: false, description: "fail deliver's first attempt" },
    explode: { type: 'boolean', default: false, description: 'fail compose with an uncaught TypeError' },
  },
};

/** compose's output. */
const composedSchema = { type: 'object', required: ['text'], properties: { text: { type: 'string' } } };

/**
 * The check `ctx.input()` applies: an object whose `name` is a non-empty string.
 * @param {unknown} value
 * @returns {value is GreetInput}
 */
function isGreetInput(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidInput('the input must be a JSON object');
  }
  const { name } = /** @type {{ name?: unknown }} */ (value);
  if (typeof name !== 'string' || name === '') {
    throw new InvalidInput('`name` must be a non-empty string');
  }
  return true;
}

/** @param {unknown} value @returns {value is Composed} */
const isComposed = (value) => typeof (/** @type {{ text?: unknown }} */ (value))?.text === 'string';

/** @typedef {{ compose: Composed, deliver: Delivered }} Outputs */

/**
 * The first step: a greeting for the input's name.
 * @param {import('@spindle/guest').StepContext<GreetInput, Outputs>} ctx
 * @returns {Composed}
 */
function compose(ctx) {
  const input = ctx.input();
  if (input.explode) {
    // On purpose: the natural uncaught error, a method of `undefined`.
    const nickname = /** @type {any} */ (input).nickname;
    nickname.trim();
  }
  ctx.log.info(`composing a greeting for ${input.name}`);
  return { text: `Hello, ${input.name}!` };
}

/** @type {import('@spindle/guest').Kind<GreetInput, Outputs>} */
export const kind = defineKind({
  name: 'greet-js',
  input: isGreetInput,
  inputSchema,
  retry: { maxAttempts: 3, initialBackoffMs: 100, maxBackoffMs: 1_000 },
  steps: {
    compose: { run: compose, outputSchema: composedSchema },

    deliver(ctx) {
      const { text } = ctx.prior('compose', isComposed);
      ctx.heartbeatOrStop();
      if (ctx.input().flaky === true && ctx.attempt === 1) {
        throw new Retryable('upstream-unavailable', 'the first attempt fails on purpose');
      }
      // Steps run at least once: the key lets a mailer drop duplicates.
      ctx.log.info(`delivered ${text} (key ${ctx.idempotencyKey})`);
      return { delivered: text, attempt: ctx.attempt };
    },
  },
});
