package pgstore

import (
	"errors"

	"github.com/wophost/wophost/sdk/wop"
)

// ConfigureError is what a plugin's Configure returns when opening its
// store failed with err. While the database cannot be reached (Unavailable)
// it is the contract's unavailable, retryable: the host keeps the
// capability waiting, not failed, and configures it again with backoff
// until the database is back. Any other err, a store the database refused
// (a failed migration, a bad schema name), is returned as it is: it will
// not pass by itself.
func ConfigureError(err error) error {
	if err == nil || !Unavailable(err) {
		return err
	}
	var we *wop.Error
	if errors.As(err, &we) {
		return err
	}
	return wop.Errorf(wop.CodeUnavailable, "%v", err).WithRetryable(true)
}
