package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/internal/procgroup"
)

// releaseGrace is how long, once a server's process group has been
// killed, the transport waits for the server's output to end. Only a
// descendant that left the group can still hold it open; the transport
// then closes its own end so that the reader, and every wait on it, ends.
const releaseGrace = 500 * time.Millisecond

// StdioOptions says how to start a stdio server.
type StdioOptions struct {
	// Command is the executable and its arguments.
	Command []string
	// Env is added to the base set of the plugin's own environment (see
	// serverEnv); nothing else of it reaches the server.
	Env map[string]string
	// Dir is the working directory; empty inherits the plugin's.
	Dir string
}

// stdioTransport supervises one server process. The process is started on
// first use and started again on the next use after it exits.
type stdioTransport struct {
	opts     StdioOptions
	maxBytes int
	// maxRounds bounds the server's requests to the client charged to one
	// waiting request.
	maxRounds int
	logger    hclog.Logger
	handle    serverRequestFunc
	nextID    *atomic.Int64

	mu     sync.Mutex
	proc   *process
	gen    int
	closed bool
}

// process is one running server, the leader of a process group of its
// own.
type process struct {
	gen   int
	cmd   *exec.Cmd
	group *procgroup.Group
	stdin io.WriteCloser
	// output are the transport's ends of the server's stdout and stderr.
	output  []io.Closer
	writeMu sync.Mutex

	// sentAfter is the last request id issued before the process
	// started: every id the client sends it is above.
	sentAfter int64

	mu      sync.Mutex
	pending map[string]*waiter
	err     error         // why the process is gone, once it is
	done    chan struct{} // closed when the process is gone
}

// waiter is a request waiting for the server's answer.
type waiter struct {
	id  int64
	key string
	ch  chan *message
	// ctx is the request's context: a request the server makes of the
	// client while this one waits, and that is charged to it, is answered
	// in it, as part of the same pack call.
	ctx context.Context
	// rounds counts the server's requests charged to this one.
	rounds int
	// cut is closed when those requests went past maxRounds.
	cut chan struct{}
	// stray gets the id of an answer that named no request the client
	// sent while this one waited: its own answer may have been that one.
	stray chan string
}

func newStdioTransport(opts StdioOptions, maxBytes, maxRounds int, logger hclog.Logger, handle serverRequestFunc, nextID *atomic.Int64) *stdioTransport {
	return &stdioTransport{opts: opts, maxBytes: maxBytes, maxRounds: maxRounds, logger: logger, handle: handle, nextID: nextID}
}

// current returns the running process, starting one if there is none.
func (t *stdioTransport) current() (*process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("client closed")
	}
	if t.proc != nil {
		select {
		case <-t.proc.done:
		default:
			return t.proc, nil
		}
	}
	t.gen++
	p, err := t.start(t.gen)
	if err != nil {
		return nil, &startError{err: err}
	}
	t.proc = p
	return p, nil
}

func (t *stdioTransport) start(gen int) (*process, error) {
	cmd := exec.Command(t.opts.Command[0], t.opts.Command[1:]...)
	cmd.Dir = t.opts.Dir
	cmd.Env = serverEnv(t.opts.Env)
	// Its own process group, so that Shutdown also ends whatever the
	// server spawned, and so does the server's own exit.
	launch := procgroup.Prepare(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", t.opts.Command[0], err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", t.opts.Command[0], err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", t.opts.Command[0], err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", t.opts.Command[0], err)
	}
	p := &process{
		gen: gen, cmd: cmd, group: launch.Started(), stdin: stdin, output: []io.Closer{stdout, stderr},
		sentAfter: t.nextID.Load(), pending: map[string]*waiter{}, done: make(chan struct{}),
	}
	t.logger.Debug("server process started", "pid", cmd.Process.Pid, "generation", gen)
	go t.logStderr(stderr)
	go t.read(p, stdout)
	go t.watchLeader(p)
	return p, nil
}

// watchLeader ends p when the server process exits, even while something
// it spawned still holds its output: by then the rest of its group has
// been killed, and the reader sees the end of the stream.
func (t *stdioTransport) watchLeader(p *process) {
	select {
	case <-p.group.LeaderExited():
		t.stop(p)
	case <-p.done:
	}
}

// logStderr forwards the server's log lines; stderr is never a signal.
func (t *stdioTransport) logStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		t.logger.Debug("server stderr", "line", sc.Text())
	}
	_, _ = io.Copy(io.Discard, r)
}

// read dispatches the server's messages until the stream ends or breaks.
func (t *stdioTransport) read(p *process, stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	var cause error
	for {
		line, err := readLine(r, t.maxBytes)
		if err != nil {
			cause = err
			break
		}
		if len(line) == 0 {
			continue
		}
		m, err := decodeMessage(line)
		if err != nil {
			// The stream can no longer be trusted to match answers to
			// requests: end the process and fail what is waiting.
			cause = err
			break
		}
		switch {
		case m.isRequest():
			w, cut := t.charge(p, m.Method)
			go t.answer(p, m, w, cut)
		case m.isResponse():
			t.deliver(p, m)
		default:
			// Notifications (progress, log messages) are not surfaced.
		}
	}
	t.fail(p, cause)
}

// deliver hands a response to the request it names. An id that is not
// waiting but was sent to p is a late answer to a request given up on (a
// timeout, a cancellation) and is dropped. An id never sent to p is a
// wrong one: the answer belongs to some request in flight, and stdio does
// not say which, so every request waiting then is refused at once rather
// than left to its timeout. The process is kept: the requests made after
// are matched as before, and late answers to the refused ones are dropped.
func (t *stdioTransport) deliver(p *process, m *message) {
	key := normalizeID(m.ID)
	p.mu.Lock()
	w, ok := p.pending[key]
	delete(p.pending, key)
	var refused []*waiter
	if !ok && !p.sent(key, t.nextID.Load()) {
		for k, c := range p.pending {
			refused = append(refused, c)
			delete(p.pending, k)
		}
	}
	p.mu.Unlock()
	switch {
	case ok:
		w.ch <- m
	case len(refused) > 0:
		t.logger.Warn("server answered with an id the client never sent; the requests waiting are refused", "id", shortID(key), "refused", len(refused))
		for _, c := range refused {
			c.stray <- key
		}
	default:
		t.logger.Warn("server answered a request id that is not waiting; ignored", "id", shortID(key))
	}
}

// sent reports whether key is the id of a request the client sent p: the
// decimal form of an id issued after p started, up to last.
func (p *process) sent(key string, last int64) bool {
	id, err := strconv.ParseInt(key, 10, 64)
	return err == nil && strconv.FormatInt(id, 10) == key && id > p.sentAfter && id <= last
}

// maxIDShown bounds an id a server sent as errors and the log show it: a
// server may send any JSON there, up to max_message_bytes.
const maxIDShown = 64

// shortID is id cut to maxIDShown bytes, marked when cut.
func shortID(id string) string {
	if len(id) <= maxIDShown {
		return id
	}
	return id[:maxIDShown] + "…"
}

// fail ends p and wakes every waiting call with cause.
func (t *stdioTransport) fail(p *process, cause error) {
	p.mu.Lock()
	if p.err == nil {
		if errors.Is(cause, io.EOF) {
			cause = errors.New("server process closed its output")
		}
		p.err = cause
	}
	p.mu.Unlock()
	p.kill()
	_ = p.stdin.Close()
	err := p.cmd.Wait()
	p.group.Release()
	t.logger.Debug("server process ended", "generation", p.gen, "cause", cause, "exit", err)
	close(p.done)
}

// kill kills the server's process group.
func (p *process) kill() {
	_ = p.group.Kill()
	_ = p.cmd.Process.Kill()
}

// stop kills p's process group and returns once p is gone. A descendant
// that left the group keeps the output open; after releaseGrace the
// transport closes its end instead of waiting for that process.
func (t *stdioTransport) stop(p *process) {
	p.kill()
	grace := time.NewTimer(releaseGrace)
	defer grace.Stop()
	select {
	case <-p.done:
		return
	case <-grace.C:
	}
	t.logger.Warn("a process that left the server's process group holds its output; closing the client's end", "generation", p.gen)
	for _, c := range p.output {
		_ = c.Close()
	}
	<-p.done
}

// readLine reads one newline-terminated message of at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > max+1 {
			return nil, fmt.Errorf("server message over the %d-byte limit", max)
		}
		buf = append(buf, chunk...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(buf) > 0 && errors.Is(err, io.EOF) {
			break
		}
		return nil, err
	}
	for len(buf) > 0 && (buf[len(buf)-1] == '\n' || buf[len(buf)-1] == '\r') {
		buf = buf[:len(buf)-1]
	}
	return buf, nil
}

// charge counts a request the server makes of the client against the
// pack call it most likely belongs to. The stdio wire does not say which
// waiting request a server request serves, so it goes to the one with the
// fewest charged so far, the oldest among equals: one call is cut only
// once every call in flight had maxRounds answered, and a server that
// keeps asking is cut however many calls it spreads its requests over.
// ping is not charged. charge returns the waiting request charged (nil
// when none waits) and whether that went past maxRounds; the request is
// then no longer pending and learns it from its cut channel.
func (t *stdioTransport) charge(p *process, method string) (w *waiter, cut bool) {
	if method == "ping" {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.pending {
		if w == nil || c.rounds < w.rounds || (c.rounds == w.rounds && c.id < w.id) {
			w = c
		}
	}
	if w == nil {
		return nil, false
	}
	w.rounds++
	if w.rounds <= t.maxRounds {
		return w, false
	}
	delete(p.pending, w.key)
	close(w.cut)
	return w, true
}

// answer replies to a server request: in the context of the waiting
// request it was charged to, or on its own with a bound when none waits.
// A request past the rounds is refused.
func (t *stdioTransport) answer(p *process, m *message, w *waiter, cut bool) {
	if cut {
		_ = p.write(encodeResponse(m.ID, nil, json.RawMessage(roundsRefusal)))
		return
	}
	parent := context.Background()
	if w != nil {
		parent = w.ctx
	}
	ctx, cancel := context.WithTimeout(parent, serverRequestTimeout)
	defer cancel()
	result, rpcErr := t.handle(ctx, m.Method, m.Params)
	_ = p.write(encodeResponse(m.ID, result, rpcErr))
}

func (p *process) write(line []byte) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write to server: %w", err)
	}
	return nil
}

func (p *process) gone() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Errorf("server process gone: %w", p.err)
}

func (t *stdioTransport) roundTrip(ctx context.Context, req *request) (*response, error) {
	p, err := t.current()
	if err != nil {
		return nil, transportErr(req.Method, err)
	}
	id := t.nextID.Add(1)
	key := strconv.FormatInt(id, 10)
	w := &waiter{id: id, key: key, ch: make(chan *message, 1), ctx: ctx, cut: make(chan struct{}), stray: make(chan string, 1)}
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return nil, transportErr(req.Method, p.gone())
	}
	p.pending[key] = w
	p.mu.Unlock()
	if err := p.write(encodeRequest(id, req.Method, req.Params)); err != nil {
		p.mu.Lock()
		delete(p.pending, key)
		p.mu.Unlock()
		return nil, transportErr(req.Method, err)
	}
	select {
	case m := <-w.ch:
		return &response{Result: m.Result, Error: m.Error}, nil
	case <-p.done:
		return nil, transportErr(req.Method, p.gone())
	case stray := <-w.stray:
		// No answer to it is awaited any more: let the server stop too.
		cancelRequest(p, id, "the server answered under an id never sent")
		return nil, transportErr(req.Method, fmt.Errorf("%w: the server answered id %s while request %d waited; this request's answer may have been that one", ErrWrongID, shortID(stray), id))
	case <-w.cut:
		// Tell the server to stop; a late answer is dropped as unknown.
		cancelRequest(p, id, "input rounds exhausted")
		return nil, transportErr(req.Method, fmt.Errorf("%w: the server made more than %d requests of the client during the call", ErrRoundsExhausted, t.maxRounds))
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, key)
		p.mu.Unlock()
		cancelRequest(p, id, "timed out")
		return nil, transportErr(req.Method, fmt.Errorf("no answer: %w", ctx.Err()))
	}
}

// cancelRequest tells the server to stop working on request id.
func cancelRequest(p *process, id int64, reason string) {
	params, _ := json.Marshal(map[string]any{"requestId": id, "reason": reason})
	_ = p.write(encodeNotification("notifications/cancelled", params))
}

func (t *stdioTransport) notify(_ context.Context, req *request) error {
	p, err := t.current()
	if err != nil {
		return transportErr(req.Method, err)
	}
	if err := p.write(encodeNotification(req.Method, req.Params)); err != nil {
		return transportErr(req.Method, err)
	}
	return nil
}

// sessionKey names the process generation: a new process needs a new
// legacy handshake. It starts the process if none runs.
func (t *stdioTransport) sessionKey() string {
	p, err := t.current()
	if err != nil {
		return ""
	}
	return strconv.Itoa(p.gen)
}

// runningKey is sessionKey of the process running now, without starting
// one: empty when none runs.
func (t *stdioTransport) runningKey() string {
	t.mu.Lock()
	p := t.proc
	t.mu.Unlock()
	if p == nil {
		return ""
	}
	select {
	case <-p.done:
		return ""
	default:
		return strconv.Itoa(p.gen)
	}
}

func (t *stdioTransport) resetSession() {}

// restart ends the current process so the next request starts a fresh
// one; used after a legacy server exits on, or ignores, the probe.
func (t *stdioTransport) restart() {
	t.mu.Lock()
	p := t.proc
	t.mu.Unlock()
	if p == nil {
		return
	}
	t.stop(p)
}

// close stops the server: stdin closed first so a well-behaved server can
// exit on its own, then the whole process group is killed.
func (t *stdioTransport) close() {
	t.mu.Lock()
	t.closed = true
	p := t.proc
	t.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
		t.stop(p)
	}
}
