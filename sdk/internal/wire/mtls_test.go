package wire

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// handshake runs a TLS handshake between client and server configs over
// a loopback socket and returns each side's error. A socket, unlike
// net.Pipe, buffers the alert a refusing side sends, so neither side
// blocks on the other.
func handshake(t *testing.T, client, server *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		s := tls.Server(conn, server)
		err = s.Handshake()
		if err == nil {
			// TLS 1.3 checks the client's certificate after the client
			// has finished; one read makes a refusal reach the client.
			_, err = s.Read(make([]byte, 1))
		}
		done <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := tls.Client(conn, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		// Write a byte for the server's read, then read: a refusal of
		// this client's certificate arrives as an alert, an acceptance as
		// the end of the connection.
		if _, clientErr = c.Write([]byte{1}); clientErr == nil {
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err != nil && err != io.EOF && !isTimeout(err) {
				clientErr = err
			}
		}
	}
	return clientErr, <-done
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func newLaunch(t *testing.T) (*launchTLS, *tls.Config) {
	t.Helper()
	l, err := newLaunchTLS()
	if err != nil {
		t.Fatal(err)
	}
	proc, err := parseLaunchBundle(l.bundle)
	if err != nil {
		t.Fatal(err)
	}
	return l, proc
}

func TestLaunchTLSBothDirections(t *testing.T) {
	l, proc := newLaunch(t)
	// The host dials the process, and (through the broker) the process
	// dials the host.
	if cerr, serr := handshake(t, l.host, proc); cerr != nil || serr != nil {
		t.Fatalf("host → process: client %v, server %v", cerr, serr)
	}
	if cerr, serr := handshake(t, proc, l.host); cerr != nil || serr != nil {
		t.Fatalf("process → host: client %v, server %v", cerr, serr)
	}
}

func TestLaunchTLSRefusesOtherLaunches(t *testing.T) {
	l, proc := newLaunch(t)
	other, otherProc := newLaunch(t)
	if _, serr := handshake(t, other.host, proc); serr == nil {
		t.Error("a process accepted the host side of another launch")
	}
	if cerr, _ := handshake(t, l.host, otherProc); cerr == nil {
		t.Error("the host accepted the process of another launch")
	}
	// A process's certificate is not the host's: one plugin cannot pose as
	// the host to another.
	if _, serr := handshake(t, otherProc, proc); serr == nil {
		t.Error("a process accepted another process as its host")
	}
	noCert := &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"}
	if _, serr := handshake(t, noCert, proc); serr == nil {
		t.Error("a process accepted a client without a certificate")
	}
}

func TestParseLaunchBundleRefusesMalformed(t *testing.T) {
	l, _ := newLaunch(t)
	blocks := strings.SplitAfter(string(l.bundle), "-----END ")
	for name, bundle := range map[string]string{
		"empty":            "",
		"not PEM":          "hello",
		"certificate only": blocks[0] + strings.SplitN(blocks[1], "\n", 2)[0] + "\n",
		"key and host swapped": func() string {
			// The host's certificate where the process key belongs.
			return strings.Replace(string(l.bundle), "EC PRIVATE KEY", "CERTIFICATE", 2)
		}(),
	} {
		if _, err := parseLaunchBundle([]byte(bundle)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAttachAndServerTLS(t *testing.T) {
	l, err := newLaunchTLS()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	cmd.Env = []string{"A=1"}
	started, err := l.attach(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer started()
	if len(cmd.ExtraFiles) != 1 {
		t.Fatalf("ExtraFiles = %d, want 1", len(cmd.ExtraFiles))
	}
	var fdVar, certVar bool
	for _, kv := range cmd.Env {
		fdVar = fdVar || kv == EnvTLSFD+"=3"
		certVar = certVar || strings.HasPrefix(kv, envClientCert+"=-----BEGIN CERTIFICATE-----")
	}
	if !fdVar || !certVar {
		t.Fatalf("environment %q lacks %s=3 or %s", cmd.Env, EnvTLSFD, envClientCert)
	}
	for _, kv := range cmd.Env {
		if strings.Contains(kv, "PRIVATE KEY") {
			t.Fatalf("a private key is in the environment: %q", kv)
		}
	}

	// Read the pipe the way the child would, from this process.
	t.Setenv(EnvTLSFD, strconv.Itoa(int(cmd.ExtraFiles[0].Fd())))
	proc, err := ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := os.LookupEnv(EnvTLSFD); ok {
		t.Errorf("%s is still set after ServerTLS", EnvTLSFD)
	}
	if cerr, serr := handshake(t, l.host, proc); cerr != nil || serr != nil {
		t.Fatalf("host → process: client %v, server %v", cerr, serr)
	}
}

func TestServerTLSWithoutDescriptor(t *testing.T) {
	t.Setenv(EnvTLSFD, "")
	os.Unsetenv(EnvTLSFD)
	cfg, err := ServerTLS()
	if cfg != nil || err != nil {
		t.Fatalf("ServerTLS() = %v, %v; want nil, nil so go-plugin's AutoMTLS applies", cfg, err)
	}
	for _, v := range []string{"x", "1", "-4"} {
		t.Setenv(EnvTLSFD, v)
		if _, err := ServerTLS(); err == nil || !strings.Contains(err.Error(), EnvTLSFD) {
			t.Errorf("%s=%s: error %v, want one naming the variable", EnvTLSFD, v, err)
		}
	}
}
