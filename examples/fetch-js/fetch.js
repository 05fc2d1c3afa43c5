// The fetch kind: one outbound call with a secret the guest never holds, and one the host
// denies. The same kind in every guest language (examples/fetch-*), for the suite's check
// that each language's HTTP client goes through the host's outbound policy alike.
//
// Input {"url", "denied_url", "message"}: `call` POSTs {"message"} as JSON to `url` with
// `authorization: Bearer <placeholder of the secret api-token>` (the host puts the value
// in), then the same body to `denied_url`, which the deployment does not allow, and
// catches the typed error. Output {"status", "body", "denied", "denied_error"}.

import { HttpError, Retryable, defineKind } from '@spindle/guest';

export const kind = defineKind({
  name: 'fetch-js',
  steps: {
    async call(ctx) {
      const { url, denied_url: deniedUrl, message } = ctx.input();
      const body = JSON.stringify({ message });
      const headers = { 'content-type': 'application/json' };
      const token = ctx.config.secret('api-token');
      if (token !== undefined) headers.authorization = `Bearer ${token}`;
      const response = await ctx.fetch(url, { method: 'POST', headers, body });
      if (!response.ok) throw new Retryable('upstream-status', `the upstream answered ${response.status}`);
      const text = await response.text();
      let denied = false;
      let deniedError = '';
      try {
        await ctx.fetch(deniedUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      } catch (error) {
        if (!(error instanceof HttpError)) throw error;
        denied = true;
        deniedError = `HttpError(${error.reason}): ${error.message}`;
      }
      return { status: response.status, body: text, denied, denied_error: deniedError };
    },
  },
});
