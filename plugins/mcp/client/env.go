package client

import (
	"maps"
	"os"
	"slices"

	"github.com/wophost/wophost/sdk/hostwire"
)

// serverEnv is the environment of a stdio server: the base set of the
// plugin's own environment (hostwire.BaseEnv: PATH, HOME, TMPDIR, TZ, the
// locale), then the server's configured variables, sorted by name. The
// plugin's other variables (its handshake cookie, its certificate, what
// the operator passed to the plugin itself) are the plugin's: a
// third-party server gets only what its own block names.
func serverEnv(configured map[string]string) []string {
	env := hostwire.BaseEnv(os.Environ())
	for _, k := range slices.Sorted(maps.Keys(configured)) {
		env = append(env, k+"="+configured[k])
	}
	return env
}
