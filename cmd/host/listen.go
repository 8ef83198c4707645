package main

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/wophost/wophost/core/config"
)

// listenFailure explains why host serve could not bind the address of h:
// a reported failure (exit 1), not a usage error, naming the address and
// where it was set.
func listenFailure(h config.HTTP, err error) error {
	where := "the default address; set listen in the host block's http block to choose another"
	if h.ListenRange.Filename != "" {
		where = "listen at " + config.FormatRange(h.ListenRange)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return &failure{fmt.Errorf("cannot listen on %s (%s): the address is already in use, by another host serve or another program; stop it, or choose a free port: %w",
			h.Listen, where, err)}
	}
	return &failure{fmt.Errorf("cannot listen on %s (%s): %w", h.Listen, where, err)}
}
