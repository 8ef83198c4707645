package consensus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

// scripted answers votes from a table: votes[round-1][participant]. A
// value starting with "!" is an error with that code. It records who was
// asked in which round and what each saw.
type scripted struct {
	votes [][]string
	asked []string
	seen  map[string][]agentruntime.Ballot
}

func (s *scripted) vote(_ context.Context, p, round int, previous []agentruntime.Ballot) (json.RawMessage, string, error) {
	key := fmt.Sprintf("r%dp%d", round, p)
	s.asked = append(s.asked, key)
	if s.seen == nil {
		s.seen = map[string][]agentruntime.Ballot{}
	}
	s.seen[key] = previous
	v := s.votes[round-1][p]
	if code, ok := strings.CutPrefix(v, "!"); ok {
		return nil, "", wop.Errorf(code, "participant %d failed", p)
	}
	return json.RawMessage(v), "because " + key, nil
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("agt_%d", i)
	}
	return out
}

func votes(bs []agentruntime.Ballot) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		if b.Error != nil {
			parts[i] = fmt.Sprintf("%d:!%s", b.Participant, b.Error.Code)
		} else {
			parts[i] = fmt.Sprintf("%d:%s", b.Participant, b.Vote)
		}
	}
	return strings.Join(parts, " ")
}

func f(v float64) *float64 { return &v }

func TestRequired(t *testing.T) {
	cases := []struct {
		req  Request
		want int
	}{
		{Request{AgentIDs: ids(4)}, 3},
		{Request{AgentIDs: ids(5), Strategy: "majority"}, 3},
		{Request{AgentIDs: ids(5), Strategy: "unanimous"}, 5},
		{Request{AgentIDs: ids(3), Strategy: "quorum", Threshold: f(2.0 / 3)}, 2},
		{Request{AgentIDs: ids(3), Strategy: "quorum", Threshold: f(0.66)}, 2},
		{Request{AgentIDs: ids(10), Strategy: "quorum", Threshold: f(0.01)}, 1},
		{Request{AgentIDs: ids(4), Strategy: "quorum", Threshold: f(1)}, 4},
	}
	for _, c := range cases {
		if got, err := Required(c.req); err != nil || got != c.want {
			t.Errorf("Required(%s, n=%d) = %d, %v; want %d", c.req.Strategy, len(c.req.AgentIDs), got, err, c.want)
		}
	}
	bad := []Request{
		{},
		{AgentIDs: ids(2), Strategy: "plurality"},
		{AgentIDs: ids(2), Strategy: "quorum"},
		{AgentIDs: ids(2), Strategy: "quorum", Threshold: f(0)},
		{AgentIDs: ids(2), Strategy: "quorum", Threshold: f(1.5)},
		{AgentIDs: ids(2), Strategy: "majority", Threshold: f(0.5)},
	}
	for _, r := range bad {
		if _, err := Required(r); wop.CodeOf(err) != wop.CodeValidation {
			t.Errorf("Required(%+v) = %v, want validation_error", r, err)
		}
	}
}

func TestMajorityConverges(t *testing.T) {
	s := &scripted{votes: [][]string{{`"yes"`, `"no"`, `" YES"`}}}
	res, err := Run(context.Background(), Request{AgentIDs: ids(3)}, s.vote)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged || res.Rounds != 1 || string(res.Decision) != `"yes"` || res.Agreement != 2.0/3 {
		t.Fatalf("result = %+v", res)
	}
	if got := votes(res.Ballots); got != `0:"yes" 1:"no" 2:" YES"` {
		t.Errorf("ballots = %s", got)
	}
	if res.Ballots[1].AgentID != "agt_1" || res.Ballots[1].Rationale != "because r1p1" {
		t.Errorf("ballot 1 = %+v", res.Ballots[1])
	}
}

func TestSplitDoesNotConverge(t *testing.T) {
	s := &scripted{votes: [][]string{{`"a"`, `"b"`, `"a"`, `"b"`}}}
	res, err := Run(context.Background(), Request{AgentIDs: ids(4)}, s.vote)
	if err != nil {
		t.Fatal(err)
	}
	if res.Converged || res.Decision != nil || res.Rounds != 1 || res.Agreement != 0.5 {
		t.Fatalf("split result = %+v", res)
	}
	b, _ := json.Marshal(res)
	if strings.Contains(string(b), "decision") {
		t.Errorf("an unconverged result carries a decision: %s", b)
	}
}

func TestQuorumMetEarlyStops(t *testing.T) {
	s := &scripted{votes: [][]string{{`{"pick":1}`, `{"pick":2}`, `{ "pick" : 1 }`, `{"pick":3}`, `{"pick":3}`}}}
	res, err := Run(context.Background(), Request{AgentIDs: ids(5), Strategy: "quorum", Threshold: f(0.4)}, s.vote)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged || string(res.Decision) != `{"pick":1}` || res.Agreement != 0.4 {
		t.Fatalf("result = %+v", res)
	}
	if got := strings.Join(s.asked, ","); got != "r1p0,r1p1,r1p2" {
		t.Errorf("asked %s; want the vote to stop once the quorum of 2 was met", got)
	}
	if len(res.Ballots) != 3 {
		t.Errorf("ballots = %s", votes(res.Ballots))
	}
}

func TestUnanimousDebate(t *testing.T) {
	s := &scripted{votes: [][]string{
		{`"ship"`, `"wait"`, `"ship"`},
		{`"-"`, `"ship"`, `"-"`}, // only participant 1 is asked again
	}}
	res, err := Run(context.Background(), Request{AgentIDs: ids(3), Strategy: "unanimous", MaxRounds: 3}, s.vote)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged || res.Rounds != 2 || string(res.Decision) != `"ship"` || res.Agreement != 1 {
		t.Fatalf("result = %+v", res)
	}
	if got := strings.Join(s.asked, ","); got != "r1p0,r1p1,r1p2,r2p1" {
		t.Errorf("asked %s", got)
	}
	// The dissenter saw the whole previous round, in participant order.
	if got := votes(s.seen["r2p1"]); got != `0:"ship" 1:"wait" 2:"ship"` {
		t.Errorf("participant 1 saw %s", got)
	}
	if s.seen["r1p0"] != nil {
		t.Error("round 1 was shown previous ballots")
	}
	if got := votes(res.Ballots); got != `0:"ship" 1:"ship" 2:"ship"` {
		t.Errorf("final ballots = %s", got)
	}
}

func TestDebateRunsOutOfRounds(t *testing.T) {
	s := &scripted{votes: [][]string{
		{`"a"`, `"b"`, `"c"`},
		{`"-"`, `"c"`, `"b"`},
	}}
	res, err := Run(context.Background(), Request{AgentIDs: ids(3), MaxRounds: 2}, s.vote)
	if err != nil {
		t.Fatal(err)
	}
	// Round 2: a (kept), c, b: still no majority; the tie goes to "a",
	// cast first.
	if res.Converged || res.Rounds != 2 || res.Agreement != 1.0/3 {
		t.Fatalf("result = %+v", res)
	}
	if got := votes(res.Ballots); got != `0:"a" 1:"c" 2:"b"` {
		t.Errorf("ballots = %s", got)
	}
}

func TestAbstentionsCountAgainst(t *testing.T) {
	s := &scripted{votes: [][]string{{`"yes"`, `!provider_unavailable`, `!agent_budget_exceeded`}}}
	res, err := Run(context.Background(), Request{AgentIDs: ids(3)}, s.vote)
	if err != nil {
		t.Fatal(err)
	}
	if res.Converged || res.Agreement != 1.0/3 {
		t.Fatalf("result = %+v", res)
	}
	if got := votes(res.Ballots); got != `0:"yes" 1:!provider_unavailable 2:!agent_budget_exceeded` {
		t.Errorf("ballots = %s", got)
	}
	// An invalid vote abstains as well.
	s = &scripted{votes: [][]string{{`"yes"`, `{`, `"yes"`}}}
	res, err = Run(context.Background(), Request{AgentIDs: ids(3), Strategy: "unanimous"}, s.vote)
	if err != nil || res.Converged || res.Ballots[1].Error == nil {
		t.Fatalf("invalid vote: %+v, %v", res, err)
	}
}

func TestConsensusFailed(t *testing.T) {
	s := &scripted{votes: [][]string{{`!provider_unavailable`, `!provider_auth_failed`}}}
	_, err := Run(context.Background(), Request{AgentIDs: ids(2)}, s.vote)
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != agentruntime.CodeConsensusFailed {
		t.Fatalf("error = %v, want consensus_failed", err)
	}
	var details struct {
		Rounds int
		Cause  wop.Error
	}
	if err := json.Unmarshal(we.Details, &details); err != nil || details.Cause.Code != "provider_unavailable" || details.Rounds != 1 {
		t.Errorf("details = %s", we.Details)
	}
}

func TestContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	voter := func(context.Context, int, int, []agentruntime.Ballot) (json.RawMessage, string, error) {
		cancel()
		return nil, "", errors.New("interrupted")
	}
	if _, err := Run(ctx, Request{AgentIDs: ids(3)}, voter); wop.CodeOf(err) != wop.CodeCancelled {
		t.Fatalf("error = %v, want cancelled", err)
	}
}

func TestDeterministic(t *testing.T) {
	run := func() string {
		s := &scripted{votes: [][]string{{`"x"`, `"y"`, `"y"`, `"x"`}, {`"-"`, `"-"`, `"-"`, `"y"`}}}
		res, err := Run(context.Background(), Request{AgentIDs: ids(4), MaxRounds: 2}, s.vote)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		return string(b)
	}
	first := run()
	for range 5 {
		if got := run(); got != first {
			t.Fatalf("results differ:\n%s\n%s", first, got)
		}
	}
	// Round 1 ties x (cast first) and y: x leads, so only participants 1
	// and 2 vote again, and their "-" leaves no majority.
	if !strings.Contains(first, `"converged":false,"rounds":2`) {
		t.Errorf("result = %s", first)
	}
}

// A round lost to a transient failure is consensus_failed marked
// retryable at the top, with that failure as its cause, wherever it sits
// among the ballots and however deep it is nested.
func TestConsensusFailedRetryableCause(t *testing.T) {
	unavailable := wop.Errorf(wop.CodeUnavailable, "host.aiEnvelope.generate: the plugin went away during the call").WithRetryable(true)
	// A family error built by hand around unavailable, flag left false, as
	// another SDK might send it.
	wrapped := (&wop.Error{Code: "acme.gateway_failed", Message: "gateway failed"}).
		WithDetails(map[string]any{"cause": unavailable})
	authFailed := wop.Errorf("provider_auth_failed", "bad key")
	noVote := wop.Errorf(wop.CodeValidation, "the participant gave no vote")

	tests := []struct {
		name      string
		errs      []error
		retryable bool
		cause     string
	}{
		{"unavailable first", []error{unavailable, authFailed}, true, wop.CodeUnavailable},
		{"unavailable after a permanent failure", []error{authFailed, unavailable}, true, wop.CodeUnavailable},
		{"unavailable without its flag", []error{noVote, wop.Errorf(wop.CodeUnavailable, "down")}, true, wop.CodeUnavailable},
		{"a family error wrapping unavailable", []error{authFailed, wrapped}, true, "acme.gateway_failed"},
		{"a hop's deadline", []error{wop.Errorf(wop.CodeDeadlineExceeded, "hop").WithRetryable(true), noVote}, true, wop.CodeDeadlineExceeded},
		{"only permanent failures", []error{authFailed, noVote}, false, "provider_auth_failed"},
		{"cancelled is not a reason to retry", []error{wop.Errorf(wop.CodeCancelled, "gave up").WithRetryable(true), noVote}, false, wop.CodeCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			voter := func(_ context.Context, p, _ int, _ []agentruntime.Ballot) (json.RawMessage, string, error) {
				return nil, "", tt.errs[p]
			}
			_, err := Run(context.Background(), Request{AgentIDs: ids(len(tt.errs)), MaxRounds: 2}, voter)
			var we *wop.Error
			if !errors.As(err, &we) || we.Code != agentruntime.CodeConsensusFailed {
				t.Fatalf("error = %v, want consensus_failed", err)
			}
			if we.Retryable != tt.retryable {
				t.Errorf("retryable = %v, want %v: %s", we.Retryable, tt.retryable, we.Message)
			}
			if tt.retryable != strings.Contains(we.Message, "(retryable: caused by ") {
				t.Errorf("message %q does not say why it is retryable", we.Message)
			}
			var d struct {
				Rounds  int
				Ballots []agentruntime.Ballot
				Cause   wop.Error
			}
			if err := json.Unmarshal(we.Details, &d); err != nil {
				t.Fatal(err)
			}
			if d.Cause.Code != tt.cause || d.Rounds != 1 || len(d.Ballots) != len(tt.errs) {
				t.Errorf("details = %s, want cause %s after one round", we.Details, tt.cause)
			}
		})
	}
}
