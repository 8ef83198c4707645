package config

import (
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// EvalContext returns the context every expression in a config file is
// evaluated in: the functions env and file, and no variables. dir is the
// config file's directory, against which file() resolves relative paths.
func (l *Loader) EvalContext(dir string) *hcl.EvalContext {
	return &hcl.EvalContext{
		Functions: map[string]function.Function{
			"env":  envFunc(),
			"file": fileFunc(dir),
		},
	}
}

// envFunc is env(name[, default]). An unset variable without a default is
// an error rather than "", so a forgotten secret fails at load time instead
// of reaching a plugin as an empty string.
func envFunc() function.Function {
	return function.New(&function.Spec{
		Description: "Returns the value of an environment variable, or the default if it is unset.",
		Params: []function.Parameter{
			{Name: "name", Type: cty.String},
		},
		VarParam: &function.Parameter{Name: "default", Type: cty.String},
		Type:     function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if len(args) > 2 {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(2, "env takes a name and at most one default")
			}
			name := args[0].AsString()
			if v, ok := os.LookupEnv(name); ok {
				return cty.StringVal(v), nil
			}
			if len(args) == 2 {
				return args[1], nil
			}
			return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "environment variable %q is not set (pass a default as a second argument to allow that)", name)
		},
	})
}

// fileFunc is file(path), reading relative to dir so a config behaves the
// same whatever the host's working directory.
func fileFunc(dir string) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the contents of a UTF-8 text file, relative to the config file's directory.",
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
		},
		Type: function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			full := resolvePath(dir, p)
			b, err := os.ReadFile(full)
			if err != nil {
				return cty.UnknownVal(cty.String), function.NewArgError(0, fmt.Errorf("cannot read file %q: %w", p, err))
			}
			if !utf8.Valid(b) {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "file %q (%s) is not valid UTF-8 text", p, filepath.Clean(full))
			}
			return cty.StringVal(string(b)), nil
		},
	})
}
