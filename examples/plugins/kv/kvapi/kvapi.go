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

// Codes of the family's failures. A vendor error code is "org.name" with
// exactly one dot (OpenWOP's grammar): the org's, not the family's, prefix.
const (
	CodeKeyNotFound      = "acme.key_not_found"
	CodeValueTooLarge    = "acme.value_too_large"
	CodeStoreUnavailable = "acme.store_unavailable"
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
