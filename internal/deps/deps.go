// Package deps pins modules that the family plugins import while they are
// being written; it is removed once they do.
package deps

import (
	_ "github.com/anthropics/anthropic-sdk-go/v2"
	_ "github.com/gofrs/flock"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"
)
