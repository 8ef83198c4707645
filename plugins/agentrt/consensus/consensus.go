// Package consensus runs a vote among agents, with optional debate rounds,
// and decides its outcome. It knows nothing of how an agent votes: the
// caller supplies a Voter.
//
// # Rules
//
// n is the number of participants. A strategy sets how many equal votes
// carry the decision (the required count):
//
//	majority   floor(n/2) + 1: a strict majority of all participants
//	quorum     ceil(threshold × n), threshold in (0, 1]
//	unanimous  n
//
// Participants are asked one at a time, in participant order, so that
// the ballots and the outcome never depend on timing. Votes are compared
// by their canonical JSON; a string vote is trimmed and lower-cased first,
// so "Yes " and "yes" agree. A participant whose run fails abstains: its
// ballot carries the error and no vote, and it counts against every
// strategy.
//
// After each round the leading vote is the one with the most ballots
// (on a tie, the one cast first in participant order). The round has
// converged when the leading vote has the required count. Under quorum, a
// round stops as soon as the required count is reached; the participants
// not yet asked cast no ballot. Majority and unanimous ask everyone.
//
// A round that has not converged is followed by another, up to maxRounds
// (default 1, so no debate). In a debate round, participants whose last
// ballot backed the leading vote keep that ballot; every other participant
// votes again, shown the previous round's ballots in participant order.
//
// The result carries the rounds run, the final round's ballots in
// participant order, agreement = (ballots for the leading vote) / n, and,
// when converged, the decision: the leading vote as its first backer cast
// it. Not converging is an answer (converged false), not an error. The
// vote fails with consensus_failed only when a round ends without a
// single valid ballot: every participant asked in it failed.
//
// consensus_failed carries one failure of that round under details.cause:
// the first retryable one when there is one, else the first. It is
// retryable exactly when that cause is (wop.Error.WithCause), so a round
// lost to a plugin restart under the agents is reported as worth asking
// again, and the top-level flag can be read off the cause it names.
package consensus

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

// Voter asks one participant for its vote in a round (counted from 1).
// previous holds the previous round's ballots in participant order, nil in
// the first round. An error makes the participant abstain this round.
type Voter func(ctx context.Context, participant, round int, previous []agentruntime.Ballot) (vote json.RawMessage, rationale string, err error)

// Request describes a vote.
type Request struct {
	// AgentIDs are the participants' agent instance ids; ballots name them.
	AgentIDs []string
	Strategy string
	// Threshold is the quorum fraction, set only under quorum.
	Threshold *float64
	// MaxRounds is the number of rounds allowed; 0 means 1.
	MaxRounds int
}

// Required returns the number of equal votes that carry the decision
// under req, or a validation_error naming the offending field.
func Required(req Request) (int, error) {
	n := len(req.AgentIDs)
	if n == 0 {
		return 0, wop.Errorf(wop.CodeValidation, "participants: at least one participant is required")
	}
	if req.Threshold != nil && req.Strategy != agentruntime.StrategyQuorum {
		return 0, wop.Errorf(wop.CodeValidation, "threshold: only the %s strategy takes a threshold", agentruntime.StrategyQuorum)
	}
	switch req.Strategy {
	case "", agentruntime.StrategyMajority:
		return n/2 + 1, nil
	case agentruntime.StrategyUnanimous:
		return n, nil
	case agentruntime.StrategyQuorum:
		if req.Threshold == nil {
			return 0, wop.Errorf(wop.CodeValidation, "threshold: the %s strategy needs a threshold in (0, 1]", agentruntime.StrategyQuorum)
		}
		t := *req.Threshold
		if !(t > 0 && t <= 1) {
			return 0, wop.Errorf(wop.CodeValidation, "threshold: %v is not in (0, 1]", t)
		}
		// The small slack keeps 2/3 × 3 at 2 despite binary rounding.
		k := int(math.Ceil(t*float64(n) - 1e-9))
		return max(k, 1), nil
	}
	return 0, wop.Errorf(wop.CodeValidation, "strategy: %q is not majority, quorum or unanimous", req.Strategy)
}

// Run holds the vote and returns its result. Errors are *wop.Error:
// validation_error for a bad request, consensus_failed when a round
// produced no valid ballot (details.cause holds the first retryable
// failure, else the first failure, and the error is retryable when that
// cause is), or the context's error when ctx ends.
func Run(ctx context.Context, req Request, vote Voter) (*agentruntime.ConsensusResult, error) {
	required, err := Required(req)
	if err != nil {
		return nil, err
	}
	maxRounds := req.MaxRounds
	if maxRounds <= 0 {
		maxRounds = 1
	}
	n := len(req.AgentIDs)
	quorum := req.Strategy == agentruntime.StrategyQuorum

	var previous []agentruntime.Ballot // previous round, participant order
	var prevByIndex map[int]agentruntime.Ballot
	leaderKey := ""
	for round := 1; ; round++ {
		var ballots []agentruntime.Ballot
		counts := map[string]int{}
		// The round's cause, should it fail: the first retryable failure
		// beats the first failure, since one participant worth asking again
		// makes the whole round worth holding again.
		var firstErr, firstRetryable *wop.Error
		failed := func(e *wop.Error) {
			if firstErr == nil {
				firstErr = e
			}
			if firstRetryable == nil && wop.IsRetryable(e) {
				firstRetryable = e
			}
		}
		reached := false
		for i := 0; i < n; i++ {
			var b agentruntime.Ballot
			if pb, ok := prevByIndex[i]; ok && pb.Error == nil && voteKey(pb.Vote) == leaderKey {
				b = pb // backed the leader: the ballot stands
			} else {
				v, rationale, err := vote(ctx, i, round, previous)
				if ctxErr := ctx.Err(); ctxErr != nil {
					return nil, fromContext(ctxErr)
				}
				b = agentruntime.Ballot{Participant: i, AgentID: req.AgentIDs[i], Rationale: rationale}
				switch {
				case err != nil:
					b.Error = wop.AsError(err).Classified()
					failed(b.Error)
				case len(bytes.TrimSpace(v)) == 0 || !json.Valid(v):
					b.Error = wop.Errorf(wop.CodeValidation, "participant %d returned no valid JSON vote", i)
					failed(b.Error)
				default:
					b.Vote = v
				}
			}
			ballots = append(ballots, b)
			if b.Error == nil {
				counts[voteKey(b.Vote)]++
				if quorum && counts[voteKey(b.Vote)] >= required {
					reached = true
					break
				}
			}
		}
		if len(counts) == 0 {
			cause := firstErr
			if firstRetryable != nil {
				cause = firstRetryable
			}
			return nil, wop.Errorf(agentruntime.CodeConsensusFailed, "round %d produced no valid ballot: every participant failed", round).
				WithDetails(map[string]any{"rounds": round, "ballots": ballots}).WithCause(cause)
		}
		key, count, first := leader(ballots, counts)
		converged := reached || count >= required
		if converged || round >= maxRounds {
			res := &agentruntime.ConsensusResult{
				Converged: converged,
				Rounds:    round,
				Agreement: float64(count) / float64(n),
				Ballots:   ballots,
			}
			if converged {
				res.Decision = first.Vote
			}
			return res, nil
		}
		previous, leaderKey = ballots, key
		prevByIndex = make(map[int]agentruntime.Ballot, len(ballots))
		for _, b := range ballots {
			prevByIndex[b.Participant] = b
		}
	}
}

// leader returns the vote with the most ballots, its count and the first
// ballot that cast it; ties go to the vote cast first.
func leader(ballots []agentruntime.Ballot, counts map[string]int) (string, int, agentruntime.Ballot) {
	bestKey, bestCount := "", -1
	var first agentruntime.Ballot
	for _, b := range ballots {
		if b.Error != nil {
			continue
		}
		k := voteKey(b.Vote)
		if counts[k] > bestCount {
			bestKey, bestCount, first = k, counts[k], b
		}
	}
	return bestKey, bestCount, first
}

// voteKey is the comparison form of a vote: canonical JSON, with a string
// vote trimmed and lower-cased.
func voteKey(v json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return string(v)
	}
	if s, ok := x.(string); ok {
		x = strings.ToLower(strings.TrimSpace(s))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return string(v)
	}
	return buf.String()
}

func fromContext(err error) *wop.Error {
	if err == context.DeadlineExceeded {
		return wop.Errorf(agentruntime.CodeAgentTimeout, "consensus ran out of time")
	}
	return wop.Errorf(wop.CodeCancelled, "consensus cancelled")
}
