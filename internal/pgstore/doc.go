// Package pgstore opens the PostgreSQL connection pool of a store of the
// postgres storage backend: one schema of its own, its tables created by
// numbered SQL migrations, each applied once however many hosts start at
// the same moment. Unavailable tells a store when an error means the
// database is out of reach, which the contract answers with the retryable
// code unavailable; ConfigureError makes that answer of a failed Open, for
// a plugin's Configure to be called again once the database is back.
//
// Migrations run with github.com/jackc/tern/v2/migrate: it works on a pgx
// connection (pgx is the driver already), reads numbered files
// (001_create_prompts.sql, 002_...) from an fs.FS, keeps the applied
// version in a table of the store's schema, and applies them under a
// PostgreSQL advisory lock, each in a transaction. Its cost is Masterminds'
// sprig, which tern uses to expand migrations as text/template: a
// migration must not contain "{{" unless it means a template.
package pgstore
