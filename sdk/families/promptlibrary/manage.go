package promptlibrary

import (
	"encoding/json"
	"time"
)

// Management methods: the operator's side of a prompt store, which
// `host prompts` calls. The host refuses them to every caller but the
// operator with capability_not_declared (docs/contract.md §4.2), so a pack
// or a plugin can read pinned prompts and never change the store.
const (
	MethodPublish  = "publish"
	MethodList     = "list"
	MethodVersions = "versions"
	MethodResolve  = "resolve"
	MethodVerify   = "verify"
	MethodReindex  = "reindex"
)

// Error codes of the management methods. They arrive as wop.Error.Code.
const (
	// CodePromptVersionConflict: different bytes were published under a
	// version that already exists.
	CodePromptVersionConflict = "prompt_version_conflict"
	// CodePromptInvalid: the bytes to publish are not a valid .prompt file.
	CodePromptInvalid = "prompt_invalid"
)

// Version is the record of one published version.
type Version struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Seq orders the versions of one name by publication, from 1.
	Seq         int       `json:"seq"`
	Digest      string    `json:"digest"`
	Size        int64     `json:"size"`
	PublishedAt time.Time `json:"publishedAt"`
	// The fields below are copied from the header for list and show; get
	// derives them from the stored bytes again.
	EnvelopeType string          `json:"envelopeType,omitempty"`
	Description  string          `json:"description,omitempty"`
	Variables    json.RawMessage `json:"variables,omitempty"`
}

// Pin returns the fully pinned reference of v: name@version#digest.
func (v *Version) Pin() Pin {
	return Pin{Name: v.Name, Version: v.Version, Digest: v.Digest}
}

// PublishRequest is the body of publish.
type PublishRequest struct {
	// Raw is the .prompt file byte for byte (base64 in JSON, so that the
	// bytes arrive exactly).
	Raw []byte `json:"raw"`
}

// PublishResult is the answer to publish.
type PublishResult struct {
	Version
	// Existed is true when the same bytes were already published under
	// this version, so nothing was written.
	Existed bool `json:"existed"`
}

// ListRequest is the body of list.
type ListRequest struct{}

// NameSummary is one prompt name in a list answer.
type NameSummary struct {
	Name     string `json:"name"`
	Versions int    `json:"versions"`
	// Last is the version published last, and Digest its digest.
	Last   string `json:"last"`
	Digest string `json:"digest"`
}

// ListResult is the answer to list: every name, sorted.
type ListResult struct {
	Names []NameSummary `json:"names"`
}

// VersionsRequest is the body of versions.
type VersionsRequest struct {
	Name string `json:"name"`
}

// VersionsResult is the answer to versions: the name's versions in
// publication order.
type VersionsResult struct {
	Versions []Version `json:"versions"`
}

// ResolveRequest is the body of resolve. PromptID must be pinned, as for
// get; the answer is the version record, without the bytes.
type ResolveRequest struct {
	PromptID string `json:"promptId"`
}

// VerifyRequest is the body of verify.
type VerifyRequest struct{}

// Problem is one integrity failure verify found.
type Problem struct {
	// Kind says what is wrong: ProblemCorrupt, ProblemOrphan,
	// ProblemIndex or ProblemPin.
	Kind string `json:"kind"`
	// Ref is name@version, the blob digest for a blob problem, the
	// index's name, or the pin for a pin problem.
	Ref string `json:"ref"`
	// Path is where the fault lies: a file, or a table row.
	Path    string `json:"path"`
	Message string `json:"message"`
}

// The kinds of Problem.
const (
	// ProblemCorrupt is a version that cannot be served as published: its
	// record is unreadable, or its bytes are missing, altered or disagree
	// with the record.
	ProblemCorrupt = "corrupt"
	// ProblemOrphan is stored content that no version record names.
	ProblemOrphan = "orphan"
	// ProblemIndex is an index that disagrees with the records.
	ProblemIndex = "index"
	// ProblemPin is a pin in a declared pack's lock map that names a
	// version the store does not hold. The store cannot see packs: the
	// operator's `host prompts verify` adds these from the config.
	ProblemPin = "pin"
)

// Report is what verify checked and found.
type Report struct {
	Names    int `json:"names"`
	Versions int `json:"versions"`
	Blobs    int `json:"blobs"`
	// Pins counts the lock map pins of declared packs checked; like
	// ProblemPin, filled in by `host prompts verify`, not by the store.
	Pins     int       `json:"pins,omitempty"`
	Problems []Problem `json:"problems"`
	// Leftovers are traces of publishes that never finished. They are
	// invisible to readers and harmless; they may be deleted.
	Leftovers []string `json:"leftovers,omitempty"`
}

// OK reports whether verify found no problem.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// VerifyResult is the answer to verify.
type VerifyResult struct {
	// Store names the store checked, for messages: a directory, or a
	// database schema.
	Store  string `json:"store"`
	Report Report `json:"report"`
}

// ReindexRequest is the body of reindex.
type ReindexRequest struct{}

// ReindexResult is the answer to reindex.
type ReindexResult struct {
	// Index names the index rebuilt.
	Index    string `json:"index"`
	Versions int    `json:"versions"`
}
