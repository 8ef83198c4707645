package main

import (
	"bytes"
	"io"

	"github.com/hashicorp/go-hclog"
)

// brokerClosedLine is what go-plugin writes, through the standard
// library's logger, when a process goes away before it dialled the host
// services the host offered it on the broker: a process that ended, or was
// stopped, without calling back. Nothing is lost then, so it is no error.
const brokerClosedLine = "plugin acceptAndServe error: broker closed"

// stdLogWriter is where the standard library's logger writes in the host:
// into logger with the level each line names, except go-plugin's
// broker-closed line, which is logged at debug.
type stdLogWriter struct {
	logger  hclog.Logger
	leveled io.Writer
}

// newStdLogWriter returns the standard library logger's writer for logger.
func newStdLogWriter(logger hclog.Logger) *stdLogWriter {
	return &stdLogWriter{
		logger:  logger,
		leveled: logger.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}

func (w *stdLogWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(brokerClosedLine)) {
		w.logger.Debug(string(bytes.TrimSpace(p)))
		return len(p), nil
	}
	return w.leveled.Write(p)
}
