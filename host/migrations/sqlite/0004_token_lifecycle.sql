-- Tokens are listed, revoked and may expire. `id` is a token's public handle: the first 16
-- hex characters of its hash, enough to name it and no help in guessing a random token (a
-- tenant sees only its own tenant's ids; only the operator sees an operator token's, which
-- may be a chosen one). `expires_at` and `revoked_at` are microseconds since the epoch; a
-- token revoked, or expired, authenticates nothing.
ALTER TABLE api_tokens ADD COLUMN id TEXT;
ALTER TABLE api_tokens ADD COLUMN expires_at INTEGER;
ALTER TABLE api_tokens ADD COLUMN revoked_at INTEGER;
UPDATE api_tokens SET id = substr(token_hash, 1, 16);
CREATE UNIQUE INDEX api_tokens_id ON api_tokens (id);
-- Until now the only operator tokens were the configured ones (`SPINDLE_OPERATOR_TOKEN` or
-- the operator-token file), named 'operator'. They take the name rotation looks for, so the
-- token a host was configured with before this migration is retired when it changes.
UPDATE api_tokens SET name = 'configured operator token'
    WHERE role = 'operator' AND tenant_id IS NULL AND name = 'operator';
