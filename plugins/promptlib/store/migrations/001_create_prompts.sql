-- The prompt store: content-addressed bodies, one immutable row per
-- published version, and one row per name that publishers lock to
-- allocate the name's next version and sequence number.
CREATE TABLE blobs (
    digest text PRIMARY KEY,
    body   bytea NOT NULL
);

CREATE TABLE names (
    name text PRIMARY KEY
);

CREATE TABLE versions (
    name          text        NOT NULL REFERENCES names (name),
    version       text        NOT NULL,
    seq           integer     NOT NULL,
    digest        text        NOT NULL REFERENCES blobs (digest),
    size          bigint      NOT NULL,
    published_at  timestamptz NOT NULL,
    envelope_type text        NOT NULL DEFAULT '',
    description   text        NOT NULL DEFAULT '',
    -- the header's variables as published: text, not jsonb, so their bytes
    -- are kept as they were
    variables     text,
    PRIMARY KEY (name, version),
    UNIQUE (name, seq)
);

CREATE INDEX versions_digest ON versions (digest);
