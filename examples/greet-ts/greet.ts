// The greet kind: compose a greeting, then deliver it once per job. The same behaviour
// in every guest language: this is the TypeScript one, compiled by `tsc` (strict) to
// JavaScript and built like a JavaScript kind. The input's type is derived from the
// schema the host checks every submission against, so the two cannot drift apart;
// `compose` still checks what it reads (the local runner does not check schemas).

import { InvalidInput, Retryable, defineKind } from '@spindle/guest';
import type { FromSchema, JSONSchema, StepContext } from '@spindle/guest';

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
} as const satisfies JSONSchema;

/** `{ name: string; flaky?: boolean; explode?: boolean }`, from the schema. */
export type GreetInput = FromSchema<typeof inputSchema>;

/** compose's output schema, and its type. */
const composedSchema = {
  type: 'object',
  required: ['text'],
  properties: { text: { type: 'string' } },
} as const satisfies JSONSchema;
type Composed = FromSchema<typeof composedSchema>;

interface Outputs {
  compose: Composed;
  deliver: { delivered: string; attempt: number };
}

/** The check `ctx.input()` applies: an object whose `name` is a non-empty string. */
function isGreetInput(value: unknown): value is GreetInput {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidInput('the input must be a JSON object');
  }
  const { name } = value as { name?: unknown };
  if (typeof name !== 'string' || name === '') {
    throw new InvalidInput('`name` must be a non-empty string');
  }
  return true;
}

const isComposed = (value: unknown): value is Composed =>
  typeof (value as { text?: unknown } | null)?.text === 'string';

/** The first step: a greeting for the input's name. */
function compose(ctx: StepContext<GreetInput, Outputs>): Composed {
  const input = ctx.input();
  if (input.explode) {
    // On purpose: the natural uncaught error, a method of `undefined`.
    const nickname = (input as { nickname?: string }).nickname as string;
    nickname.trim();
  }
  ctx.log.info(`composing a greeting for ${input.name}`);
  return { text: `Hello, ${input.name}!` };
}

export const kind = defineKind<GreetInput, Outputs>({
  name: 'greet-ts',
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
