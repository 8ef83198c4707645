package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/httpstatus"
)

// A browser's POST from another site is refused before any node runs:
// an Origin that only starts like the host's, another port, or a
// Sec-Fetch-Site that is not same-origin. The same POST from this origin,
// or from a client that is no browser, runs.
func TestPostsFromAnotherSiteAreRefused(t *testing.T) {
	f := newFake()
	f.res = &host.RunResult{RunID: "run_01", Output: json.RawMessage(`{}`)}
	s := New(NewCurrent(f), Options{})
	for _, tc := range []struct {
		name    string
		headers map[string]string
		refused bool
	}{
		{"no browser", nil, false},
		{"this origin", map[string]string{"Origin": "http://127.0.0.1:7427"}, false},
		{"this origin, fetch metadata", map[string]string{"Origin": "http://127.0.0.1:7427", "Sec-Fetch-Site": "same-origin"}, false},
		{"a site that starts like it", map[string]string{"Origin": "http://127.0.0.1:7427.evil.example"}, true},
		{"another port", map[string]string{"Origin": "http://127.0.0.1:7428"}, true},
		{"cross-site fetch metadata", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"same-site but not same-origin", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other.127.0.0.1:7427"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.calls
			req := httptest.NewRequest("POST", "http://127.0.0.1:7427/v1/nodes/kvdemo.remember:execute", strings.NewReader(`{"input":{}}`))
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			ran := f.calls - before
			if tc.refused {
				e := envelope(t, w)
				if w.Code != http.StatusForbidden || e.Error != httpstatus.CodeForbidden || ran != 0 {
					t.Errorf("%d %s, %d runs; want 403 and none", w.Code, w.Body, ran)
				}
				return
			}
			if w.Code != http.StatusOK || ran != 1 {
				t.Errorf("%d %s, %d runs; want 200 and one", w.Code, w.Body, ran)
			}
		})
	}
	// A read from another site is no change: it is answered (and the
	// token it needs is not the browser's to send).
	req := httptest.NewRequest("GET", "http://127.0.0.1:7427/v1/plugins", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Errorf("cross-site GET: %d %s", w.Code, w.Body)
	}
}
