// Lines for the host's structured log, tagged by the host with the job and step.
//
// The host caps line length and lines per call: log what an operator needs to explain
// an outcome. Unlike a failure's code and message, a line may carry detail.

import { currentHost } from './host.js';

export const LEVELS = Object.freeze(['trace', 'debug', 'info', 'warn', 'error']);

/** A `log(level, message)` function with a method per level, writing to `hostOf()`. */
export function makeLog(hostOf) {
  const log = (level, message) => {
    if (!LEVELS.includes(level)) throw new RangeError(`log level must be one of ${LEVELS.join(', ')}, got ${String(level)}`);
    hostOf().log(level, String(message));
  };
  for (const level of LEVELS) log[level] = (message) => log(level, message);
  return Object.freeze(log);
}

/** Logs through whatever host the current call runs against. */
export const log = makeLog(currentHost);
