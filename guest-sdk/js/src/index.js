// @spindle/guest: write Spindle job kinds in JavaScript.
//
// A kind is one `defineKind(...)` exported as `kind`; the SDK turns JSON payloads into
// values, thrown errors into `retryable`/`refused` outcomes, and hides the WIT glue.
// Nothing here imports the component's WIT interfaces, so a kind runs under Node too:
// `@spindle/guest/testing`'s runJob drives a whole job the way the host would.

export { defineKind, isKind } from './kind.js';
export { KindSpec, DEFAULT_RETRY } from './spec.js';
export { Outcome } from './outcome.js';
export { StepContext } from './step.js';
export { JobSummary } from './job.js';
export { Child, ChildResult, FanOut, Priority } from './workflow.js';
export { Cancelled, InvalidInput, LeaseLost, Refused, Retryable, StepError, Stopped } from './errors.js';
export { log } from './log.js';
export { config } from './config.js';
export { HttpError, errorForStatus, fetch, readJson } from './http.js';
