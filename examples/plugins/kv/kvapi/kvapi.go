// Package kvapi is the wire shape of the acme.kv vendor family: the plain
// Go request and result types that the kv plugin serves and that packs
// send through ctx.Call.
package kvapi

// Family is the vendor family name, advertised under "extensions".
const Family = "acme.kv"

// Methods of the family.
const (
	MethodGet    = "get"
	MethodPut    = "put"
	MethodDelete = "delete"
)

// Codes of the family's failures; vendor codes carry the family prefix.
const (
	CodeKeyNotFound      = "acme.kv.key_not_found"
	CodeValueTooLarge    = "acme.kv.value_too_large"
	CodeStoreUnavailable = "acme.kv.store_unavailable"
)

// GetRequest reads one key.
type GetRequest struct {
	Key string `json:"key"`
}

// GetResult is the value stored under a key.
type GetResult struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Version counts the puts of this key, starting at 1.
	Version uint64 `json:"version"`
}

// PutRequest stores a value under a key.
type PutRequest struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// PutResult reports the key's new version.
type PutResult struct {
	Key     string `json:"key"`
	Version uint64 `json:"version"`
}

// DeleteRequest removes a key.
type DeleteRequest struct {
	Key string `json:"key"`
}

// DeleteResult reports whether the key existed.
type DeleteResult struct {
	Key     string `json:"key"`
	Deleted bool   `json:"deleted"`
}
