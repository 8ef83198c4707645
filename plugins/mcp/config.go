package main

import (
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wophost/wophost/plugins/mcp/client"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/schema"
)

// Limits and defaults of the configuration.
const (
	// maxRoundsLimit is the largest max_rounds accepted.
	maxRoundsLimit       = 16
	defaultMaxRounds     = 8
	defaultTimeout       = 60 * time.Second
	defaultDiscover      = 5 * time.Second
	defaultMaxMessage    = 16 << 20
	policyDecline        = "decline"
	policyAcceptDefaults = "accept-defaults"
	policyFixed          = "fixed"
)

// configSchema is the shape of the plugin's config block.
func configSchema() schema.Block {
	return schema.Block{
		Attributes: []schema.Attribute{
			{Name: "max_rounds", Type: schema.Number, Whole: true, Min: schema.Bound(1), Max: schema.Bound(maxRoundsLimit), Description: fmt.Sprintf("retries of one input-required exchange before the call fails with upstream_unavailable (1-%d, default %d)", maxRoundsLimit, defaultMaxRounds)},
			{Name: "max_message_bytes", Type: schema.Number, Whole: true, Min: schema.Bound(1024), Max: schema.Bound(1 << 30), Description: "largest message read from a server (default 16777216)"},
		},
		Blocks: []schema.NestedBlock{{
			TypeName:    "server",
			Nesting:     schema.NestingMap,
			Description: `an MCP server, labelled with the serverId packs use: server "docs" { ... }`,
			Block: schema.Block{
				Attributes: []schema.Attribute{
					{Name: "command", Type: schema.ListString, Description: "stdio server: executable and arguments; the plugin starts and supervises the process"},
					{Name: "env", Type: schema.MapString, Sensitive: true, Description: "stdio server: environment variables, added to the base set (PATH, HOME, TMPDIR, TZ, the locale); nothing else of the plugin's environment reaches the server"},
					{Name: "cwd", Type: schema.String, Description: "stdio server: working directory"},
					{Name: "url", Type: schema.String, Description: "Streamable HTTP server: the MCP endpoint (http or https)"},
					{Name: "headers", Type: schema.MapString, Sensitive: true, Description: "Streamable HTTP server: headers sent on every request, such as Authorization"},
					{Name: "timeout", Type: schema.String, Duration: true, Description: `bound on each request to the server (duration, default "60s")`},
					{Name: "discover_timeout", Type: schema.String, Duration: true, Description: `bound on the server/discover probe, after which a silent stdio server is taken for a 2025-11-25 one (default "5s")`},
					{Name: "minimum_revision", Type: schema.String, OneOf: []string{client.RevisionLegacy, client.RevisionModern}, Description: `oldest MCP revision accepted: "2025-11-25" (default) or "2026-07-28"`},
				},
				Blocks: []schema.NestedBlock{
					{
						TypeName:    "elicitation",
						Nesting:     schema.NestingSingle,
						Description: "how elicitation requests are answered (default: declined)",
						Block: schema.Block{Attributes: []schema.Attribute{
							{Name: "policy", Type: schema.String, OneOf: []string{policyDecline, policyAcceptDefaults, policyFixed}, Description: `"decline" (default), "accept-defaults" (accept with the schema's defaults) or "fixed" (accept with answers, then defaults)`},
							{Name: "answers", Type: schema.MapString, Description: "fixed answers by property name, converted to the property's type"},
						}},
					},
					{
						TypeName:    "root",
						Nesting:     schema.NestingList,
						Description: "a root answered to roots/list requests; without any, roots are not offered",
						Block: schema.Block{Attributes: []schema.Attribute{
							{Name: "uri", Type: schema.String, Required: true, Description: "file:// URI of the root"},
							{Name: "name", Type: schema.String, Description: "display name"},
						}},
					},
				},
			},
		}},
	}
}

// rawConfig is the config block as the host sends it (null for absent
// attributes).
type rawConfig struct {
	MaxRounds       *float64                   `json:"max_rounds"`
	MaxMessageBytes *float64                   `json:"max_message_bytes"`
	Server          map[string]rawServerConfig `json:"server"`
}

type rawServerConfig struct {
	Command         []string          `json:"command"`
	Env             map[string]string `json:"env"`
	Cwd             *string           `json:"cwd"`
	URL             *string           `json:"url"`
	Headers         map[string]string `json:"headers"`
	Timeout         *string           `json:"timeout"`
	DiscoverTimeout *string           `json:"discover_timeout"`
	MinimumRevision *string           `json:"minimum_revision"`
	Elicitation     *struct {
		Policy  *string           `json:"policy"`
		Answers map[string]string `json:"answers"`
	} `json:"elicitation"`
	Root []struct {
		URI  string  `json:"uri"`
		Name *string `json:"name"`
	} `json:"root"`
}

// config is the validated configuration.
type config struct {
	maxRounds  int
	maxMessage int
	servers    map[string]*serverConfig
}

type serverConfig struct {
	id              string
	stdio           *client.StdioOptions
	http            *client.HTTPOptions
	timeout         time.Duration
	discoverTimeout time.Duration
	minimumRevision string
	policy          string
	answers         map[string]string
	roots           []rootConfig
	// unstartable says why the server's executable cannot be started as
	// the configuration is read. It is no configuration error: the other
	// servers serve, and this one's calls fail until the executable is
	// there.
	unstartable string
}

type rootConfig struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// serverIDPattern and maxServerIDBytes keep ids usable in logs, URLs and
// tool allowlists ("serverId/toolName"). The length is checked apart: a
// counted repetition compiles to one state per count, at start.
var serverIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

const maxServerIDBytes = 64

// validate checks the raw config and returns every problem found.
func validate(rc *rawConfig) (*config, plugin.ConfigErrors) {
	var errs plugin.ConfigErrors
	bad := func(path []string, summary, detail string) {
		errs = append(errs, &plugin.ConfigError{Path: path, Summary: summary, Detail: detail})
	}
	c := &config{maxRounds: defaultMaxRounds, maxMessage: defaultMaxMessage, servers: map[string]*serverConfig{}}
	// The schema's constraints (ranges, durations, the words each
	// setting takes) were checked before Configure.
	if rc.MaxRounds != nil {
		c.maxRounds = int(*rc.MaxRounds)
	}
	if rc.MaxMessageBytes != nil {
		c.maxMessage = int(*rc.MaxMessageBytes)
	}
	ids := make([]string, 0, len(rc.Server))
	for id := range rc.Server {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		rs := rc.Server[id]
		at := func(attr ...string) []string { return append([]string{"server", id}, attr...) }
		if len(id) > maxServerIDBytes || !serverIDPattern.MatchString(id) {
			bad(at(), "Invalid server id", fmt.Sprintf("server id %q must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit", id))
			continue
		}
		s := &serverConfig{id: id, timeout: defaultTimeout, discoverTimeout: defaultDiscover, minimumRevision: client.RevisionLegacy, policy: policyDecline}
		hasCmd, hasURL := len(rs.Command) > 0, rs.URL != nil
		switch {
		case hasCmd && hasURL:
			bad(at("url"), "Conflicting server transport", "set either command (stdio) or url (Streamable HTTP), not both")
		case !hasCmd && !hasURL:
			bad(at(), "Missing server transport", "set command (stdio) or url (Streamable HTTP)")
		case hasCmd:
			if rs.Command[0] == "" {
				bad(at("command"), "Invalid command", "the executable name is empty")
			} else if _, err := exec.LookPath(rs.Command[0]); err != nil {
				s.unstartable = err.Error()
			}
			command := append([]string(nil), rs.Command...)
			// A relative path is fixed now, against the plugin's working
			// directory, so that cwd does not change which binary runs.
			if strings.ContainsRune(command[0], filepath.Separator) && !filepath.IsAbs(command[0]) {
				if abs, err := filepath.Abs(command[0]); err == nil {
					command[0] = abs
				}
			}
			s.stdio = &client.StdioOptions{Command: command, Env: rs.Env}
			if rs.Cwd != nil {
				s.stdio.Dir = *rs.Cwd
			}
			if rs.Headers != nil {
				bad(at("headers"), "Headers on a stdio server", "headers apply to url servers only")
			}
		default:
			u, err := url.Parse(*rs.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(at("url"), "Invalid url", fmt.Sprintf("%q is not an http:// or https:// URL", *rs.URL))
			}
			s.http = &client.HTTPOptions{URL: *rs.URL, Headers: rs.Headers}
			if rs.Env != nil || rs.Cwd != nil {
				bad(at("env"), "Process settings on an HTTP server", "env and cwd apply to command servers only")
			}
		}
		if d, ok := duration(rs.Timeout, at("timeout"), bad); ok {
			s.timeout = d
		}
		if d, ok := duration(rs.DiscoverTimeout, at("discover_timeout"), bad); ok {
			s.discoverTimeout = d
		}
		if rs.MinimumRevision != nil {
			s.minimumRevision = *rs.MinimumRevision
		}
		if e := rs.Elicitation; e != nil {
			if e.Policy != nil {
				s.policy = *e.Policy
			}
			if len(e.Answers) > 0 && s.policy != policyFixed {
				bad(at("elicitation", "answers"), "Answers without the fixed policy", `answers are used only with policy = "fixed"`)
			}
			s.answers = e.Answers
		}
		for i, r := range rs.Root {
			u, err := url.Parse(r.URI)
			if err != nil || u.Scheme != "file" {
				bad(at("root", strconv.Itoa(i), "uri"), "Invalid root uri", fmt.Sprintf("%q is not a file:// URI", r.URI))
				continue
			}
			rt := rootConfig{URI: r.URI}
			if r.Name != nil {
				rt.Name = *r.Name
			}
			s.roots = append(s.roots, rt)
		}
		c.servers[id] = s
	}
	return c, errs
}

// duration parses an optional duration attribute.
func duration(v *string, path []string, bad func([]string, string, string)) (time.Duration, bool) {
	if v == nil {
		return 0, false
	}
	d, err := time.ParseDuration(*v)
	if err != nil {
		bad(path, "Invalid duration", err.Error())
		return 0, false
	}
	return d, true
}
