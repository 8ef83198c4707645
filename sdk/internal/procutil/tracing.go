package procutil

import (
	"context"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/tracing"
)

// Tracing returns the tracer provider the host asked for in the
// environment (a no-op one when tracing is off or its settings are
// malformed, which is logged) and a func that flushes it before exit.
func Tracing(service string, logger hclog.Logger) (*tracing.Provider, func()) {
	tp, err := tracing.FromEnv(context.Background(), os.Getenv, service)
	if err != nil {
		logger.Warn("tracing is off: its settings are malformed", "error", err)
	}
	return tp, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			logger.Warn("could not flush traces", "error", err)
		}
	}
}
