package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// HTTPOptions says how to reach a Streamable HTTP server.
type HTTPOptions struct {
	// URL is the MCP endpoint.
	URL string
	// Headers are sent on every request (for example Authorization).
	Headers map[string]string
	// Client is the HTTP client; nil uses a default one.
	Client *http.Client
}

// httpTransport posts every message to the endpoint.
type httpTransport struct {
	opts     HTTPOptions
	client   *http.Client
	maxBytes int
	// maxRounds bounds the server's requests to the client on the stream
	// of one request.
	maxRounds int
	logger    hclog.Logger
	handle    serverRequestFunc
	nextID    *atomic.Int64

	mu        sync.Mutex
	sessionID string // legacy sessions only
	sessions  int    // counts legacy sessions, for sessionKey
}

func newHTTPTransport(opts HTTPOptions, maxBytes, maxRounds int, logger hclog.Logger, handle serverRequestFunc, nextID *atomic.Int64) *httpTransport {
	c := opts.Client
	if c == nil {
		c = &http.Client{}
	}
	return &httpTransport{opts: opts, client: c, maxBytes: maxBytes, maxRounds: maxRounds, logger: logger, handle: handle, nextID: nextID}
}

func (t *httpTransport) newRequest(ctx context.Context, req *request, body []byte) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, t.opts.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range t.opts.Headers {
		hr.Header.Set(k, v)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	if req.Version != "" {
		hr.Header.Set("MCP-Protocol-Version", req.Version)
	}
	if !req.Legacy {
		hr.Header.Set("Mcp-Method", req.Method)
		if req.HasName {
			hr.Header.Set("Mcp-Name", encodeHeaderValue(req.Name))
		}
		for _, h := range req.ParamHeaders {
			hr.Header.Set(h.Name, h.Value)
		}
	} else {
		t.mu.Lock()
		if t.sessionID != "" {
			hr.Header.Set("Mcp-Session-Id", t.sessionID)
		}
		t.mu.Unlock()
	}
	return hr, nil
}

func (t *httpTransport) roundTrip(ctx context.Context, req *request) (*response, error) {
	id := t.nextID.Add(1)
	hr, err := t.newRequest(ctx, req, encodeRequest(id, req.Method, req.Params))
	if err != nil {
		return nil, transportErr(req.Method, err)
	}
	res, err := t.client.Do(hr)
	if err != nil {
		return nil, transportErr(req.Method, err)
	}
	defer res.Body.Close()
	if req.Legacy && req.Method == "initialize" {
		if sid := res.Header.Get("Mcp-Session-Id"); sid != "" {
			t.mu.Lock()
			t.sessionID = sid
			t.mu.Unlock()
		}
	}
	body := io.LimitReader(res.Body, int64(t.maxBytes)+1)
	ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if ct == "text/event-stream" && res.StatusCode == http.StatusOK {
		m, err := t.readStream(ctx, req, body, strconv.FormatInt(id, 10))
		if err != nil {
			return nil, transportErr(req.Method, err)
		}
		return &response{Result: m.Result, Error: m.Error, Status: res.StatusCode}, nil
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, transportErr(req.Method, fmt.Errorf("read response: %w", err))
	}
	if len(b) > t.maxBytes {
		return nil, transportErr(req.Method, fmt.Errorf("response over the %d-byte limit", t.maxBytes))
	}
	m, derr := decodeMessage(b)
	if res.StatusCode == http.StatusOK {
		if derr != nil {
			return nil, transportErr(req.Method, derr)
		}
		if !m.isResponse() || normalizeID(m.ID) != strconv.FormatInt(id, 10) {
			return nil, transportErr(req.Method, fmt.Errorf("response id %s does not match request id %d", normalizeID(m.ID), id))
		}
		return &response{Result: m.Result, Error: m.Error, Status: res.StatusCode}, nil
	}
	// A JSON-RPC error on an error status is an answer from the server;
	// anything else is for the caller to interpret (era detection) or a
	// transport failure.
	if derr == nil && m.Error != nil {
		return &response{Error: m.Error, Status: res.StatusCode}, nil
	}
	return nil, transportErr(req.Method, &statusError{Status: res.StatusCode, Body: b})
}

// readStream reads a request-scoped SSE stream up to the response to id,
// answering server requests of a legacy session on the way, in ctx: they
// belong to this request. Past maxRounds of them (ping aside) the stream
// is closed, which cancels the request.
func (t *httpTransport) readStream(ctx context.Context, req *request, body io.Reader, id string) (*message, error) {
	r := bufio.NewReaderSize(body, 64<<10)
	var data []byte
	total, asked := 0, 0
	for {
		line, err := readLine(r, t.maxBytes)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("event stream ended before the response")
			}
			return nil, fmt.Errorf("read event stream: %w", err)
		}
		total += len(line) + 1
		if total > t.maxBytes {
			return nil, fmt.Errorf("response over the %d-byte limit", t.maxBytes)
		}
		switch {
		case len(line) == 0:
			if len(data) == 0 {
				continue
			}
			m, err := decodeMessage(data)
			data = nil
			if err != nil {
				return nil, err
			}
			switch {
			case m.isResponse():
				if normalizeID(m.ID) != id {
					return nil, fmt.Errorf("response id %s does not match request id %s", normalizeID(m.ID), id)
				}
				return m, nil
			case m.isRequest():
				if m.Method != "ping" {
					asked++
				}
				if asked > t.maxRounds {
					go t.refuse(m)
					return nil, fmt.Errorf("%w: the server made more than %d requests of the client during the call", ErrRoundsExhausted, t.maxRounds)
				}
				go t.answer(ctx, m)
			}
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		default:
			// comments (":"), event names, ids and retry hints
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// answer posts the reply to a server request of a legacy session, made
// in the context of the request on whose stream it came.
func (t *httpTransport) answer(parent context.Context, m *message) {
	ctx, cancel := context.WithTimeout(parent, serverRequestTimeout)
	defer cancel()
	result, rpcErr := t.handle(ctx, m.Method, m.Params)
	t.reply(ctx, m, result, rpcErr)
}

// refuse answers a server request past the rounds with an error; the
// request it came with is over, so the reply has a bound of its own.
func (t *httpTransport) refuse(m *message) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t.reply(ctx, m, nil, json.RawMessage(roundsRefusal))
}

// reply posts the answer to a server request.
func (t *httpTransport) reply(ctx context.Context, m *message, result, rpcErr json.RawMessage) {
	req := &request{Method: m.Method, Legacy: true}
	hr, err := t.newRequest(ctx, req, encodeResponse(m.ID, result, rpcErr))
	if err != nil {
		return
	}
	res, err := t.client.Do(hr)
	if err != nil {
		t.logger.Warn("could not answer a server request", "method", m.Method, "error", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
}

func (t *httpTransport) notify(ctx context.Context, req *request) error {
	hr, err := t.newRequest(ctx, req, encodeNotification(req.Method, req.Params))
	if err != nil {
		return transportErr(req.Method, err)
	}
	res, err := t.client.Do(hr)
	if err != nil {
		return transportErr(req.Method, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	if res.StatusCode/100 != 2 {
		return transportErr(req.Method, &statusError{Status: res.StatusCode})
	}
	return nil
}

func (t *httpTransport) sessionKey() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return "http-" + strconv.Itoa(t.sessions)
}

func (t *httpTransport) resetSession() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sessionID = ""
	t.sessions++
}

// close ends a legacy session politely; modern servers keep no state.
func (t *httpTransport) close() {
	t.mu.Lock()
	sid := t.sessionID
	t.sessionID = ""
	t.mu.Unlock()
	if sid == "" {
		return
	}
	hr, err := http.NewRequest(http.MethodDelete, t.opts.URL, nil)
	if err != nil {
		return
	}
	for k, v := range t.opts.Headers {
		hr.Header.Set(k, v)
	}
	hr.Header.Set("Mcp-Session-Id", sid)
	if res, err := t.client.Do(hr); err == nil {
		_ = res.Body.Close()
	}
}
