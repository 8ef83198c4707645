package main

import (
	"bytes"
	"log"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestStdLogWriterBrokerClosedIsDebug checks that go-plugin's broker-closed
// line, written when a process ends without calling back, stays out of an
// info-level log, while go-plugin's other error lines still come out as
// errors.
func TestStdLogWriterBrokerClosedIsDebug(t *testing.T) {
	for _, level := range []hclog.Level{hclog.Info, hclog.Debug} {
		var out bytes.Buffer
		logger := hclog.New(&hclog.LoggerOptions{Name: "host", Level: level, Output: &out})
		std := log.New(newStdLogWriter(logger), "", 0)
		std.Printf("[ERR] plugin: plugin acceptAndServe error: broker closed")
		std.Printf("[ERR] plugin: plugin acceptAndServe error: listen unix: address already in use")
		got := out.String()
		closed := strings.Contains(got, "broker closed")
		if closed != (level == hclog.Debug) {
			t.Errorf("at %s, broker closed logged = %v:\n%s", level, closed, got)
		}
		if closed && !strings.Contains(got, "[DEBUG] host: [ERR] plugin: plugin acceptAndServe error: broker closed") {
			t.Errorf("at %s, broker closed not logged at debug:\n%s", level, got)
		}
		if !strings.Contains(got, "[ERROR] host: plugin: plugin acceptAndServe error: listen unix") {
			t.Errorf("at %s, another broker error not logged as an error:\n%s", level, got)
		}
	}
}
