-- Who made each token (issue 53): the operator, the tenant itself, or the tenant's
-- creation (its first token, handed over). Uses of a tenant token the operator made are
-- written to that tenant's audit trail. Expand only: a nullable column (a token stored
-- before counts as its tenant's own).
ALTER TABLE api_tokens ADD COLUMN minted_by TEXT;
