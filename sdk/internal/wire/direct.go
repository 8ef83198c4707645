package wire

import "crypto/tls"

// SelfSignedCertificate returns a fresh P-256 key and a self-signed
// certificate for localhost, as each side of a launch gets: a direct
// channel's server presents one, and its callers pin it.
func SelfSignedCertificate() (tls.Certificate, error) { return newCert() }
