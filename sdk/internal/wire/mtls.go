package wire

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// EnvTLSFD names the inherited file descriptor on which the host hands a
// plugin or pack the key material of its connection.
const EnvTLSFD = "WOPHOST_TLS_FD"

// envClientCert is go-plugin's AutoMTLS variable. The host sets it too, so
// a plugin that does not read EnvTLSFD (one built on plain go-plugin, or in
// another language) still runs go-plugin's AutoMTLS against the host's
// certificate.
const envClientCert = "PLUGIN_CLIENT_CERT"

// maxTLSBundle bounds what a process reads from the descriptor: two P-256
// certificates and a key take about 1.5 KiB.
const maxTLSBundle = 64 << 10

// certValidity covers any process lifetime; the keys never outlive the
// process and are never written to disk.
const certValidity = 10 * 365 * 24 * time.Hour

// launchTLS is the mutual TLS of one process launch, the same trust as
// go-plugin's AutoMTLS: a fresh key pair for each side, each certificate
// self-signed and trusted by the other side alone. The difference is who
// generates the process's half: the host, on P-256, handing it over an
// inherited pipe. go-plugin generates P-521 keys in both processes, whose
// key generation, signatures and verifications cost each side about 13 ms
// of CPU per launch; P-256 costs a fraction of a millisecond.
type launchTLS struct {
	// host is the host's side: its certificate, trusting the process's.
	host *tls.Config
	// hostCertPEM is set as PLUGIN_CLIENT_CERT for go-plugin's AutoMTLS.
	hostCertPEM []byte
	// bundle is the process's side: its certificate and key, then the
	// host's certificate, in PEM.
	bundle []byte
}

// newLaunchTLS generates the key material of one launch.
func newLaunchTLS() (*launchTLS, error) {
	hostCert, err := newCert()
	if err != nil {
		return nil, fmt.Errorf("host certificate: %w", err)
	}
	procCert, err := newCert()
	if err != nil {
		return nil, fmt.Errorf("process certificate: %w", err)
	}
	hostPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hostCert.Certificate[0]})
	keyDER, err := x509.MarshalECPrivateKey(procCert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return nil, fmt.Errorf("process key: %w", err)
	}
	var bundle bytes.Buffer
	for _, b := range []*pem.Block{
		{Type: "CERTIFICATE", Bytes: procCert.Certificate[0]},
		{Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := pem.Encode(&bundle, b); err != nil {
			return nil, err
		}
	}
	bundle.Write(hostPEM)
	return &launchTLS{
		host:        mutualConfig(hostCert, procCert.Leaf),
		hostCertPEM: hostPEM,
		bundle:      bundle.Bytes(),
	}, nil
}

// attach gives cmd the process's half on an inherited pipe (named by
// EnvTLSFD in its environment, never in the environment itself) and sets
// PLUGIN_CLIENT_CERT. It returns a function to call once the process has
// started (or failed to), which closes the host's copy of the pipe.
func (l *launchTLS) attach(cmd *exec.Cmd) (started func(), err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("tls pipe: %w", err)
	}
	// The bundle is far below a pipe's buffer, so the write cannot block
	// before the process reads.
	_, err = w.Write(l.bundle)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("tls pipe: %w", err)
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	// A nil Env would make exec pass the host's whole environment; a
	// command given none gets the base set instead.
	if cmd.Env == nil {
		cmd.Env = BaseEnv(os.Environ())
	}
	cmd.Env = append(cmd.Env, EnvTLSFD+"="+strconv.Itoa(fd), envClientCert+"="+string(l.hostCertPEM))
	return func() { r.Close() }, nil
}

// ServerTLS is the TLS provider of the SDKs' go-plugin servers: the
// process's half of the launch read from EnvTLSFD, or nil when the host
// handed none (go-plugin's AutoMTLS then applies). The descriptor is read
// once and closed, and the variable removed, so no child inherits either.
func ServerTLS() (*tls.Config, error) {
	v, ok := os.LookupEnv(EnvTLSFD)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(EnvTLSFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q is not an inherited descriptor", EnvTLSFD, v)
	}
	f := os.NewFile(uintptr(fd), "wophost-tls")
	if f == nil {
		return nil, fmt.Errorf("%s=%d is not open", EnvTLSFD, fd)
	}
	defer f.Close()
	bundle, err := io.ReadAll(io.LimitReader(f, maxTLSBundle+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", EnvTLSFD, err)
	}
	if len(bundle) > maxTLSBundle {
		return nil, fmt.Errorf("%s: more than %d bytes", EnvTLSFD, maxTLSBundle)
	}
	return parseLaunchBundle(bundle)
}

// parseLaunchBundle builds the process's side from the PEM the host hands
// over: the process's certificate and key, then the host's certificate.
func parseLaunchBundle(bundle []byte) (*tls.Config, error) {
	var blocks []*pem.Block
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		blocks = append(blocks, b)
	}
	if len(blocks) != 3 || blocks[0].Type != "CERTIFICATE" || blocks[1].Type != "EC PRIVATE KEY" || blocks[2].Type != "CERTIFICATE" {
		return nil, errors.New("tls bundle: want a certificate, its EC private key and the host's certificate")
	}
	own, err := tls.X509KeyPair(pem.EncodeToMemory(blocks[0]), pem.EncodeToMemory(blocks[1]))
	if err != nil {
		return nil, fmt.Errorf("tls bundle: %w", err)
	}
	peer, err := x509.ParseCertificate(blocks[2].Bytes)
	if err != nil {
		return nil, fmt.Errorf("tls bundle: host certificate: %w", err)
	}
	return mutualConfig(own, peer), nil
}

// mutualConfig presents own and trusts peer alone, as a server (client
// certificates required) and as a client: the go-plugin broker reverses
// the roles when a process dials the host's services.
func mutualConfig(own tls.Certificate, peer *x509.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(peer)
	return &tls.Config{
		Certificates: []tls.Certificate{own},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS12,
		ServerName:   "localhost",
	}
}

// newCert generates a P-256 key and a self-signed certificate for
// localhost, usable by a client and a server. It is no CA: the peer trusts
// this one certificate, not what its key could sign.
func newCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
