package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// Every non-2xx answer is the error envelope: a wrong method is 405 with
// Allow, an unknown path 404, and neither echoes an oversized input whole.
func TestEveryRefusalIsAnEnvelope(t *testing.T) {
	s := New(NewCurrent(newFake()), Options{})
	long := strings.Repeat("x", 100<<10)
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"DELETE", "/v1/plugins", http.StatusMethodNotAllowed, "wophost.method_not_allowed", "GET, HEAD"},
		{"GET", "/v1/nodes/kvdemo.remember:execute", http.StatusMethodNotAllowed, "wophost.method_not_allowed", "POST"},
		{"PUT", "/readyz", http.StatusMethodNotAllowed, "wophost.method_not_allowed", "GET, HEAD"},
		{"GET", "/nowhere", http.StatusNotFound, wop.CodeNotFound, ""},
		{"GET", "/" + long, http.StatusNotFound, wop.CodeNotFound, ""},
		{"POST", "/v1/nodes/a." + long + ":execute", http.StatusNotFound, wop.CodeNotFound, ""},
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, strings.NewReader(`{}`)))
		e := envelope(t, w)
		if w.Code != tc.status || e.Error != tc.code || w.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %.40s: %d %s Allow %q", tc.method, tc.path, w.Code, w.Body, w.Header().Get("Allow"))
		}
		if w.Body.Len() > 1024 {
			t.Errorf("%s %.40s: a %d-byte answer echoes the input", tc.method, tc.path, w.Body.Len())
		}
	}
}

// Runs of nodes no pack serves share one metric label, whatever typeId
// the caller sends.
func TestRunLabelOfUnknownNodes(t *testing.T) {
	f := newFake()
	f.unknown = map[string]bool{"ghost.node": true}
	f.err = wop.Errorf(wop.CodeNotFound, "no loaded pack serves node")
	var labels []string
	s := New(NewCurrent(f), Options{OnRun: func(typeID string, _ time.Duration, _ error) { labels = append(labels, typeID) }})
	for _, id := range []string{"ghost.node", "kvdemo.remember"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("POST", "/v1/nodes/"+id+":execute", strings.NewReader(`{}`)))
	}
	if strings.Join(labels, " ") != UnknownNodeLabel+" kvdemo.remember" {
		t.Fatalf("labels %q", labels)
	}
}
