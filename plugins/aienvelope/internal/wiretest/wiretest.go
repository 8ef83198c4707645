// Package wiretest replays recorded provider answers from
// plugins/aienvelope/testdata/wire through httptest servers, and records
// what the plugin sent, so tests check both directions of the wire.
package wiretest

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Dir returns the fixture directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "wire")
}

// Fixture is one recorded answer.
type Fixture struct {
	Status int
	Header http.Header
	Body   []byte
}

// Load reads the fixture name (without ".http").
func Load(t testing.TB, name string) Fixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(Dir(), name+".http"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return Fixture{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// Request is one request the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// Server answers with the fixtures in order, repeating the last one, and
// records every request.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	fixtures []Fixture
	requests []Request
	// Gate, when set, is received from before each answer, so a test can
	// hold a request in flight.
	Gate chan struct{}
}

// NewServer starts a server replaying the named fixtures.
func NewServer(t testing.TB, names ...string) *Server {
	t.Helper()
	s := &Server{}
	for _, n := range names {
		s.fixtures = append(s.fixtures, Load(t, n))
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	f := s.fixtures[min(n, len(s.fixtures)-1)]
	gate := s.Gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	for k, vs := range f.Header {
		if k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(f.Status)
	_, _ = w.Write(f.Body)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Calls returns how many requests arrived.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}
