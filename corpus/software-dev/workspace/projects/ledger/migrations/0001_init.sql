-- Initial schema for the ledger service.
CREATE EXTENSION IF NOT EXISTS "pgcrypto";

CREATE TABLE accounts (
    id          UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_ref   TEXT        NOT NULL,
    currency    CHAR(3)     NOT NULL DEFAULT 'EUR',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    closed_at   TIMESTAMPTZ
);

CREATE UNIQUE INDEX accounts_owner_currency ON accounts (owner_ref, currency)
    WHERE closed_at IS NULL;

CREATE TABLE postings (
    id           UUID PRIMARY KEY,
    account_id   UUID        NOT NULL REFERENCES accounts (id),
    transfer_id  UUID        NOT NULL,
    amount_cents BIGINT      NOT NULL CHECK (amount_cents <> 0),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX postings_account_created ON postings (account_id, created_at DESC);
CREATE INDEX postings_transfer ON postings (transfer_id);

-- Every transfer must balance: the postings of one transfer sum to zero.
CREATE OR REPLACE FUNCTION check_transfer_balanced() RETURNS TRIGGER AS $$
BEGIN
    IF (SELECT SUM(amount_cents) FROM postings WHERE transfer_id = NEW.transfer_id) <> 0 THEN
        RAISE EXCEPTION 'transfer % does not balance', NEW.transfer_id;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE CONSTRAINT TRIGGER postings_balanced
    AFTER INSERT ON postings
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION check_transfer_balanced();
