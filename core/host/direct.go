package host

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// endRunTimeout bounds ending a run on one direct channel.
const endRunTimeout = 5 * time.Second

// endRunGrace is how long past its deadline ending a run may still hold
// the run's answer (endRunWait).
const endRunGrace = 250 * time.Millisecond

// endRunWait is how long ending a run whose deadline is deadline may take
// at now when its answer waits for it: until the deadline, and
// endRunGrace past a deadline that has passed, never over endRunTimeout.
// A run answers at its deadline whatever a plugin does: a stuck plugin's
// channel is given up on, its calls there cutting the run's log.
func endRunWait(deadline, now time.Time) time.Duration {
	return min(endRunTimeout, max(deadline.Sub(now), endRunGrace))
}

// directOffers returns the direct channels a run may use, one per plugin
// process that serves a family the node declared, with the run's grant
// for it, and the channels to end when the run is over. A run gets none
// when the operator turned direct channels off, when it replays a record
// (whose calls the host answers), or when it has no deadline (a grant
// must expire). A family whose node calls the host must check itself
// (NeedsHost) stays on the routed path. advertised are the families the
// run's pack is told of.
func (h *Host) directOffers(run *dispatch.Run, opts RunOptions, log bool, advertised map[string][]byte) ([]*wophostv1.DirectChannelOffer, []*registry.DirectChannel, error) {
	if !h.cfg.Host.DirectChannels || opts.Replay != nil || run.Deadline.IsZero() || run.Allowed == nil {
		return nil, nil, nil
	}
	byChannel := map[*registry.DirectChannel]*wophostv1.Grant{}
	var channels []*registry.DirectChannel
	var families []string
	for fam := range advertised {
		families = append(families, fam)
	}
	sort.Strings(families)
	for _, fam := range families {
		if !run.Allowed(fam, "") || h.router.NeedsHost(fam) {
			continue
		}
		_, f, ok := h.reg.Lookup(fam)
		if !ok || f.Direct == nil {
			continue
		}
		g := byChannel[f.Direct]
		if g == nil {
			g = &wophostv1.Grant{
				RunId: run.ID, NodeId: run.NodeID, TypeId: run.TypeID, Pack: run.Pack,
				DeadlineUnixNano: run.Deadline.UnixNano(), Depth: 1,
				DepthLimit: uint32(h.cfg.Host.CallDepthLimit), MaxBytes: int64(h.cfg.Host.MaxMessageBytes),
				RunToken: run.Token.Reveal(), IdempotencyKey: run.IdempotencyKey,
				Log: log, LogMaxCalls: int64(h.cfg.Host.Runs.LogMaxCalls), LogMaxBytes: int64(h.cfg.Host.Runs.LogMaxBytes),
			}
			byChannel[f.Direct] = g
			channels = append(channels, f.Direct)
		}
		gf := &wophostv1.GrantedFamily{Name: fam, Whole: true}
		facets := make([]string, 0, len(f.Facets))
		for facet := range f.Facets {
			facets = append(facets, facet)
		}
		sort.Strings(facets)
		for _, facet := range facets {
			if run.Allowed(fam, facet) {
				gf.Facets = append(gf.Facets, facet)
			}
		}
		g.Families = append(g.Families, gf)
	}
	offers := make([]*wophostv1.DirectChannelOffer, 0, len(channels))
	for _, ch := range channels {
		g := byChannel[ch]
		signed, err := hostwire.SignGrant(ch.Key, g)
		if err != nil {
			return nil, nil, wop.Errorf(wop.CodeInternal, "grant a direct channel: %v", err)
		}
		offer := &wophostv1.DirectChannelOffer{Endpoint: ch.Endpoint, Grant: signed}
		for _, gf := range g.Families {
			offer.Families = append(offer.Families, gf.GetName())
		}
		offers = append(offers, offer)
	}
	return offers, channels, nil
}

// endDirect ends run on every channel it was offered, so that its grants
// are refused from now on, and adds the calls it made there to its
// invocation log (when it keeps one) and to the metrics. The plugin's
// report of a channel's calls is the log's; for a channel whose plugin
// cannot give one (gone, replaced or stuck), the pack's account of the
// calls it made there (nil when it kept none) takes its place, and
// without either the log is cut where the calls would be, with the
// reason: they may have happened, and a replay must not answer past them.
func (h *Host) endDirect(run *dispatch.Run, started time.Time, channels []*registry.DirectChannel, offers []*wophostv1.DirectChannelOffer, log *dispatch.RunLog, account *wophostv1.DirectCallLog) {
	if len(channels) == 0 {
		return
	}
	if log == nil {
		// Without a log nothing waits for the answers (the metrics take
		// them when they come), so the run's caller does not either: the
		// grants end one round trip after the run.
		go h.collectDirect(run, started, channels, offers, nil, nil)
		return
	}
	h.collectDirect(run, started, channels, offers, log, account)
}

// collectDirect ends run on channels and takes in what they report, or
// what account says of the channels that report nothing (endDirect).
func (h *Host) collectDirect(run *dispatch.Run, started time.Time, channels []*registry.DirectChannel, offers []*wophostv1.DirectChannelOffer, log *dispatch.RunLog, account *wophostv1.DirectCallLog) {
	answers := make([]*wophostv1.EndRunResponse, len(channels))
	failures := make([]error, len(channels))
	var wg sync.WaitGroup
	for i, ch := range channels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := endRunTimeout
			if log != nil {
				// The run's answer waits for this.
				wait = endRunWait(run.Deadline, time.Now())
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			resp, err := ch.EndRun(ctx, run.ID, run.Deadline)
			if err != nil {
				failures[i] = err
				return
			}
			answers[i] = resp
		}()
	}
	wg.Wait()
	observer, _ := h.router.Observer().(dispatch.ReportedCallObserver)
	// The same caller name the router logs for the node's relayed calls.
	caller := admission.NodeCaller(run.Pack, run.TypeID)
	accountCut := false
	for i, resp := range answers {
		var reported []*wophostv1.DirectCall
		var dropped int64
		var cut time.Time
		var reason, reportedBy string
		switch {
		case resp != nil:
			reported, dropped, cut = resp.GetCalls(), resp.GetDropped(), time.Unix(0, resp.GetCutUnixNano()).UTC()
			reason = "the run's calls on a direct channel passed the run log's bounds"
		case log != nil && account != nil:
			h.logger.Warn("could not end a run on a direct channel; its calls there are logged from the pack's account",
				"run_id", run.ID, "channel", channels[i].Endpoint.GetAddress(), "error", failures[i])
			reportedBy = dispatch.ReportedByPack
			families := map[string]bool{}
			if i < len(offers) {
				for _, f := range offers[i].GetFamilies() {
					families[f] = true
				}
			}
			for _, c := range account.GetCalls() {
				if families[c.GetFamily()] {
					reported = append(reported, c)
				}
			}
			if !accountCut && account.GetDropped() > 0 {
				// The account's cut holds across its channels: it is
				// taken once.
				accountCut = true
				dropped, cut, reason = account.GetDropped(), time.Unix(0, account.GetCutUnixNano()).UTC(), account.GetCutReason()
			}
		default:
			level := hclog.Debug
			if log != nil {
				level = hclog.Warn
			}
			h.logger.Log(level, "could not end a run on a direct channel, and the pack gave no account of its calls there; the run's log is cut",
				"run_id", run.ID, "channel", channels[i].Endpoint.GetAddress(), "error", failures[i])
			if log != nil {
				// Nothing is known of the channel's calls: the log ends
				// where the run began.
				log.AddDirect(nil, 1, started, fmt.Sprintf("the plugin serving a direct channel could not be asked for the run's calls there (%v), and the pack gave no account of them", failures[i]))
			}
			continue
		}
		calls := make([]dispatch.Invocation, 0, len(reported))
		for _, c := range reported {
			var werr *wop.Error
			if len(c.GetError()) > 0 {
				werr = &wop.Error{}
				if err := json.Unmarshal(c.GetError(), werr); err != nil {
					werr = wop.Errorf(wop.CodeInternal, "the plugin reported an unreadable error envelope")
				}
			}
			took := time.Duration(c.GetDurationMicros()) * time.Microsecond
			if werr != nil {
				// The line the router writes for a relayed call that fails.
				h.logger.Debug("host-service call refused or failed", "run_id", run.ID, "node_id", run.NodeID,
					"family", c.GetFamily(), "method", c.GetMethod(), "caller", caller, "code", werr.Code, "path", "direct")
			}
			if observer != nil {
				var err error
				if werr != nil {
					err = werr
				}
				observer.CallReported(c.GetFamily(), c.GetMethod(), took, err)
			}
			if log == nil {
				continue
			}
			inv := dispatch.Invocation{
				Caller: caller, Depth: 1, Family: c.GetFamily(), Method: c.GetMethod(),
				Key:       dispatch.InvocationKey(c.GetFamily(), c.GetMethod(), c.GetPayload()),
				StartedAt: time.Unix(0, c.GetStartedUnixNano()).UTC(), DurationMicros: c.GetDurationMicros(),
				Error: werr, Direct: true, ReportedBy: reportedBy,
			}
			if werr == nil {
				inv.Result = c.GetResult()
			}
			calls = append(calls, inv)
		}
		if log != nil {
			log.AddDirect(calls, int(dropped), cut, reason)
		}
	}
}
