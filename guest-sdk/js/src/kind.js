// defineKind: a kind's description and step functions, as the `kind` interface.

import { failureOf, unknownStep } from './errors.js';
import { currentHost } from './host.js';
import { JobSummary } from './job.js';
import { Outcome } from './outcome.js';
import { KindSpec } from './spec.js';
import { StepContext } from './step.js';

const KIND = Symbol('spindle.kind');

/**
 * Defines a kind. Either its steps, in order, with its policies:
 *
 *   export const kind = defineKind({
 *     name: 'greet',
 *     steps: { compose: (ctx) => ..., deliver: { run: async (ctx) => ..., weight: 3 } },
 *     retry: { maxAttempts: 5, initialBackoffMs: 100, maxBackoffMs: 10_000 },
 *     input: isGreeting,          // the check ctx.input() applies
 *     onFailure: (job) => ...,    // sets has-failure-effect
 *   });
 *
 * or a KindSpec and one function for every step: `defineKind({ spec, runStep(ctx) })`.
 *
 * A step function returns an Outcome, or any JSON-able value (a Uint8Array: raw bytes),
 * which completes the step; it may be async. What it throws is mapped by type: Refused,
 * Retryable, InvalidInput as themselves, anything else retryable `uncaught-exception`
 * with its stack on stderr.
 *
 * The result is the object componentize-js exports as `spindle:job/kind@0.2.0`
 * (`describe`, `runStep`, `onFailure`, `onSuccess`, taking and returning WIT values), so a
 * kind module only has to export it; the local runner calls the same functions.
 */
export function defineKind(definition) {
  const { spec, dispatch } = specAndSteps(definition);
  if (definition.onFailure) spec.failureEffect();
  if (definition.onSuccess) spec.notifyOnSuccess();
  const inputCheck = definition.input;
  spec.toWit(); // Throws now, at import, on a spec the host would refuse to read.

  // Plain closures: the component's glue calls these unbound.
  const describe = () => spec.toWit();

  const runStep = async (input) => {
    const host = currentHost();
    const ctx = new StepContext(input, host, { inputCheck });
    try {
      const run = dispatch(input.step);
      if (run === undefined) throw unknownStep(input.step);
      const result = await run(ctx);
      return (result instanceof Outcome ? result : Outcome.complete(result)).wit;
    } catch (error) {
      const { retryable, failure } = failureOf(error, `step \`${input.step}\``, host);
      return { tag: retryable ? 'retryable' : 'refused', val: failure };
    }
  };

  const hook = (name, fn) => async (summary) => {
    if (fn === undefined) return { tag: 'ok', val: undefined };
    const host = currentHost();
    try {
      await fn(new JobSummary(summary, { inputCheck }));
      return { tag: 'ok', val: undefined };
    } catch (error) {
      return { tag: 'err', val: failureOf(error, name, host).failure };
    }
  };

  return Object.freeze({
    [KIND]: true,
    name: spec.name,
    spec,
    describe,
    runStep,
    onFailure: hook('on-failure', definition.onFailure),
    onSuccess: hook('on-success', definition.onSuccess),
  });
}

/** Whether `value` came from defineKind. */
export function isKind(value) {
  return value?.[KIND] === true;
}

function specAndSteps(definition) {
  if (definition.spec !== undefined) {
    if (!(definition.spec instanceof KindSpec)) throw new TypeError('`spec` must be a KindSpec');
    if (typeof definition.runStep !== 'function') throw new TypeError('a kind with a `spec` needs a `runStep(ctx)` function');
    const keys = new Set(definition.spec.stepKeys);
    return { spec: definition.spec, dispatch: (key) => (keys.has(key) ? definition.runStep : undefined) };
  }
  const spec = new KindSpec(definition.name);
  const table = new Map();
  for (const { key, run, weight, outputSchema } of stepList(definition.steps)) {
    if (typeof run !== 'function') throw new TypeError(`step \`${key}\` needs a function`);
    spec.step(key, weight ?? 1, { outputSchema });
    table.set(key, run);
  }
  if (table.size === 0) throw new TypeError(`kind \`${definition.name}\` declares no step`);
  if (definition.retry !== undefined) spec.retry(definition.retry);
  if (definition.cancellable !== undefined) spec.cancellable(definition.cancellable);
  if (definition.inputSchema !== undefined) spec.inputSchema(definition.inputSchema);
  return { spec, dispatch: (key) => table.get(key) };
}

/** Steps as `{ key, run, weight?, outputSchema? }`, from an object (in key order) or a list. */
function stepList(steps) {
  if (Array.isArray(steps)) return steps;
  if (steps === null || typeof steps !== 'object') throw new TypeError('`steps` is an object of step functions or a list');
  return Object.entries(steps).map(([key, step]) => {
    // JS puts integer-like keys first whatever the source order says.
    if (/^(0|[1-9]\d*)$/.test(key)) throw new TypeError(`step key \`${key}\` would not keep its order in an object: list the steps instead`);
    return typeof step === 'function' ? { key, run: step } : { key, ...step };
  });
}
