package wire

import (
	"crypto/tls"

	"google.golang.org/grpc"
)

// SelfSignedCertificate returns a fresh P-256 key and a self-signed
// certificate for localhost, as each side of a launch gets: a direct
// channel's server presents one, and its callers pin it.
func SelfSignedCertificate() (tls.Certificate, error) { return newCert() }

// DialOptions are the gRPC dial options every connection of the protocol
// uses: the message size limit, its errors and the flow-control windows.
func DialOptions(maxBytes int) []grpc.DialOption { return dialOptions(maxBytes) }
