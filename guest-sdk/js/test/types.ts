// Compile-time checks of the declarations (`tsc -p test`); never run.

import { Child, FanOut, InvalidInput, KindSpec, Outcome, Retryable, defineKind, errorForStatus, readJson } from '../index.js';
import type { FromSchema, Guard, JobSummary, JSONSchema, StepContext } from '../index.js';
import { ChildOutcome, runJob } from '../testing.js';

interface Order {
  id: string;
  cents: number;
}
interface Outputs {
  reserve: { hold: string };
  charge: { receipt: string };
  ship: { tracking: string };
}

const isOrder: Guard<Order> = (value): value is Order => typeof (value as Order)?.id === 'string';

export const kind = defineKind<Order, Outputs>({
  name: 'order',
  input: isOrder,
  retry: { maxAttempts: 5 },
  steps: {
    reserve(ctx) {
      const order: Order = ctx.input();
      ctx.log.info(`reserving ${order.id}`);
      return { hold: `h-${order.cents}` };
    },
    charge: {
      weight: 3,
      async run(ctx: StepContext<Order, Outputs>) {
        const { hold } = ctx.prior('reserve');
        const response = errorForStatus(await ctx.fetch('https://pay.example.com', { method: 'POST', body: hold }));
        const body = await readJson(response, { parse: (v: unknown) => v as { id: string } });
        if (ctx.heartbeat({ done: 1, total: 2n }) !== 'proceed') return Outcome.snooze(5);
        return { receipt: body.id };
      },
    },
    ship(ctx) {
      const children = ctx.children;
      if (children === undefined) {
        return Outcome.awaitChildren(FanOut.all().child('label', { id: 1 }, { priority: 'background' }).child(new Child('pack', new Uint8Array([1])))).withCursor('1');
      }
      const first = children[0]?.outputJson((v): v is { tracking: string } => typeof v === 'object');
      if (!first) throw new Retryable('no-label');
      return { tracking: first.tracking };
    },
  },
  onFailure(job: JobSummary<Order, Outputs>) {
    const hold = job.output('reserve')?.hold;
    if (hold === undefined) throw new InvalidInput('nothing to release', { code: 'nothing-held' });
  },
});

export const raw = defineKind({
  spec: new KindSpec('raw').step('only', 2, { outputSchema: { type: 'object' } }).retry(2, 10, 20).notCancellable(),
  runStep: (ctx) => (ctx.key === 'only' ? Outcome.more('c', 1) : Outcome.skip('no')),
});

export async function check(): Promise<string | undefined> {
  const run = await runJob(kind, { id: 'a', cents: 3 }, { children: () => ChildOutcome.succeeded({ tracking: 't' }) });
  const charged = run.output('charge');
  return run.succeeded ? charged?.receipt : run.failure?.code;
}

// A schema object, and the input type read from it.
const greeting = {
  type: 'object',
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1 },
    flaky: { type: 'boolean' },
    tier: { enum: ['free', 'pro'] },
    tags: { type: 'array', items: { type: 'string' } },
    note: { type: ['string', 'null'] },
    count: { type: 'integer', minimum: 0 },
    either: { anyOf: [{ type: 'string' }, { type: 'number' }] },
    nested: { type: 'object', required: ['id'], properties: { id: { const: 7 } } },
    elsewhere: { $ref: '#/$defs/x' },
  },
} as const satisfies JSONSchema;

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Greeting = FromSchema<typeof greeting>;
export const readsTheSchema: Same<
  Greeting,
  {
    name: string;
    flaky?: boolean;
    tier?: 'free' | 'pro';
    tags?: string[];
    note?: string | null;
    count?: number;
    either?: string | number;
    nested?: { id: 7 };
    elsewhere?: unknown;
  }
> = true;
export const anUnwrittenSchemaIsUnknown: Same<FromSchema<JSONSchema>, unknown> = true;

export const typed = defineKind<Greeting, { compose: { text: string } }>({
  name: 'typed',
  inputSchema: greeting,
  steps: { compose: (ctx) => ({ text: `Hello, ${ctx.input().name}!` }) },
});
export const typedSpec = new KindSpec('typed').inputSchema(greeting).inputSchema('{"type":"object"}').step('a');
// @ts-expect-error: not a JSON Schema type
export const misspelt = new KindSpec('typed').inputSchema({ type: 'text' });
