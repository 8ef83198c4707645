package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/wophost/wophost/internal/rooted"
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

// MaxFileBytes bounds what file() reads: config values are secrets,
// certificates and small documents, and a mistyped path must not make the
// host read a device or a huge file into memory.
const MaxFileBytes = 4 << 20

// fileFunc is file(path), reading relative to dir so a config behaves the
// same whatever the host's working directory. A relative path must stay
// inside dir, and so must what it leads to: "../" cannot reach beyond the
// config's directory, and neither can a symbolic link, since the file is
// opened through an os.Root on dir. A config copied from elsewhere thus
// cannot read files its author did not place beside it; a link that stays
// inside is followed. An absolute path is taken as written, links and all,
// since the operator chose it. Only regular files up to MaxFileBytes are
// read.
func fileFunc(dir string) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the contents of a UTF-8 text file, relative to the config file's directory.",
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
		},
		Type: function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			if p == "" {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "file path is empty")
			}
			if !filepath.IsAbs(p) && !filepath.IsLocal(p) {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(0,
					"file %q leaves the config file's directory (%s); a relative path must stay inside it, use an absolute path to read a file elsewhere", p, dir)
			}
			full := resolvePath(dir, p)
			b, err := readConfigFile(dir, p)
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

// readConfigFile reads the file p names for file(): an absolute path as
// written, a relative one inside dir only (see package rooted).
func readConfigFile(dir, p string) ([]byte, error) {
	if filepath.IsAbs(p) {
		return readBounded(func(flag int) (*os.File, error) { return os.OpenFile(p, flag, 0) }, MaxFileBytes)
	}
	b, err := readBounded(func(flag int) (*os.File, error) { return rooted.OpenFile(dir, p, flag) }, MaxFileBytes)
	if oe := (*rooted.OutsideError)(nil); errors.As(err, &oe) {
		return nil, fmt.Errorf("it leads outside the config file's directory (%s) through a symbolic link; a relative path must stay inside it, use an absolute path to read a file elsewhere", dir)
	}
	return b, err
}

// readBounded reads the regular file open opens, refusing anything else
// (devices, FIFOs, directories) and anything larger than limit. The file
// is opened without blocking, since opening a FIFO for reading would wait
// for a writer, and checked once open, so that what is checked is what is
// read.
func readBounded(open func(flag int) (*os.File, error), limit int64) ([]byte, error) {
	f, err := open(os.O_RDONLY | syscall.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (mode %s)", fi.Mode())
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}
