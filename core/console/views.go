package console

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// viewTimeout bounds what one view asks of the host: a page that waits
// on a stuck plugin says so rather than hanging the tab.
const viewTimeout = 10 * time.Second

// render answers the template name executed over data as a fragment of
// HTML with status.
func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := c.pages.ExecuteTemplate(&buf, name, data); err != nil {
		c.opts.Logger.Error("render console view", "view", name, "error", err)
		buf.Reset()
		status = http.StatusInternalServerError
		_ = c.pages.ExecuteTemplate(&buf, "problem.html", problem{Title: "This page could not be drawn", Message: err.Error()})
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// problem is a page that could not show what was asked, and why.
type problem struct {
	Title   string
	Message string
	Code    string
}

// renderProblem answers err as a problem fragment with the status the
// API would answer it with.
func (c *Console) renderProblem(w http.ResponseWriter, title string, err error) {
	we := wop.AsError(err)
	status := http.StatusInternalServerError
	switch {
	case we.Code == wop.CodeNotFound || errors.Is(err, fs.ErrNotExist):
		status = http.StatusNotFound
	case we.Code == wop.CodeValidation:
		status = http.StatusBadRequest
	case we.Code == wop.CodeUnavailable:
		status = http.StatusServiceUnavailable
	}
	c.render(w, status, "problem.html", problem{Title: title, Message: we.Message, Code: we.Code})
}

// withHost runs fn against the host that serves now, or answers that
// none does.
func (c *Console) withHost(w http.ResponseWriter, r *http.Request, fn func(ctx context.Context, b Backend)) {
	b, release := c.opts.Acquire()
	defer release()
	if b == nil {
		c.render(w, http.StatusServiceUnavailable, "problem.html", problem{Title: "The host is starting",
			Message: "No host is running yet: its plugins and packs are starting. This page refreshes by itself.", Code: wop.CodeUnavailable})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), viewTimeout)
	defer cancel()
	fn(ctx, b)
}

// overviewData is the overview page.
type overviewData struct {
	Version  string
	Started  time.Time
	Uptime   time.Duration
	Ready    bool
	NotReady string
	Storage  host.StorageInfo
	Families []familyView
	Records  []registry.Record
	Packs    []host.PackInfo
}

// familyView is one advertised family with its facets' names.
type familyView struct {
	Name   string
	Vendor bool
	Facets []string
}

// coreFamilies are the families of the host-services contract; any other
// advertised family is a vendor's.
var coreFamilies = []string{wop.FamilyAIEnvelope, wop.FamilyPromptLibrary, wop.FamilyAgentRuntime, wop.FamilyMCP, wop.FamilyAgents}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	c.withHost(w, r, func(_ context.Context, b Backend) {
		now := c.opts.Now()
		d := overviewData{Version: c.opts.Version, Started: c.opts.Started, Uptime: now.Sub(c.opts.Started),
			Storage: b.Storage(), Records: b.Registry().Records(), Packs: b.Packs()}
		if err := b.Ready(); err != nil {
			d.NotReady = err.Error()
		} else {
			d.Ready = true
		}
		for name, facets := range b.Registry().Advertised() {
			f := familyView{Name: name, Vendor: !slices.Contains(coreFamilies, name)}
			for facet := range facets {
				f.Facets = append(f.Facets, facet)
			}
			slices.Sort(f.Facets)
			d.Families = append(d.Families, f)
		}
		slices.SortFunc(d.Families, func(a, b familyView) int {
			if a.Vendor != b.Vendor {
				if a.Vendor {
					return 1
				}
				return -1
			}
			return cmp.Compare(a.Name, b.Name)
		})
		c.render(w, http.StatusOK, "overview.html", d)
	})
}

// runsData is the runs page: its filters, as asked, and a page of runs.
type runsData struct {
	Query   runsQuery
	Problem string
	Runs    []host.RunSummary
	// Next is the address of the following page, "" on the last.
	Next     string
	Statuses []string
}

// runsQuery is the runs page's filters, as the form holds them.
type runsQuery struct {
	TypeID, Status, ErrorCode, IdempotencyKey, Since, Until, After string
}

// runsParams are the query parameters of the runs page.
var runsParams = []string{"typeId", "status", "errorCode", "idempotencyKey", "since", "until", "after"}

// pageSize is how many runs a page lists.
const pageSize = 25

func (c *Console) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := runsData{Statuses: []string{host.OutcomeSucceeded, host.OutcomeFailed}, Query: runsQuery{
		TypeID: q.Get("typeId"), Status: q.Get("status"), ErrorCode: q.Get("errorCode"),
		IdempotencyKey: q.Get("idempotencyKey"), Since: q.Get("since"), Until: q.Get("until"), After: q.Get("after")}}
	f, err := d.Query.filter()
	if err != nil {
		d.Problem = err.Error()
		c.render(w, http.StatusBadRequest, "runs.html", d)
		return
	}
	f.Limit = pageSize
	f.Owner, f.AllOwners = c.opts.Access.RunScope(r)
	c.withHost(w, r, func(ctx context.Context, b Backend) {
		page, err := b.ListRuns(ctx, f)
		if err != nil {
			d.Problem = wop.AsError(err).Message
			status := http.StatusInternalServerError
			if wop.CodeOf(err) == wop.CodeValidation {
				status = http.StatusBadRequest
			}
			c.render(w, status, "runs.html", d)
			return
		}
		d.Runs = page.Runs
		if page.Next != "" {
			next := d.Query.values()
			next.Set("after", page.Next)
			d.Next = Prefix + "runs?" + next.Encode()
		}
		c.render(w, http.StatusOK, "runs.html", d)
	})
}

// filter turns the form's values into a run filter, naming the field
// that is wrong.
func (q runsQuery) filter() (host.RunFilter, error) {
	f := host.RunFilter{TypeID: q.TypeID, ErrorCode: q.ErrorCode, IdempotencyKey: q.IdempotencyKey, After: q.After}
	switch q.Status {
	case "", host.OutcomeSucceeded, host.OutcomeFailed:
		f.Outcome = q.Status
	default:
		return f, fmt.Errorf("status: %q is neither %s nor %s", clip(q.Status, 40), host.OutcomeSucceeded, host.OutcomeFailed)
	}
	var err error
	if f.Since, err = parseWhen("since", q.Since); err != nil {
		return f, err
	}
	if f.Until, err = parseWhen("until", q.Until); err != nil {
		return f, err
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, fmt.Errorf("until: %s is not after since (%s)", q.Until, q.Since)
	}
	return f, nil
}

// values is the filters as a query, empty ones left out and the cursor
// too: the next page's address sets its own.
func (q runsQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"typeId": q.TypeID, "status": q.Status, "errorCode": q.ErrorCode,
		"idempotencyKey": q.IdempotencyKey, "since": q.Since, "until": q.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// whenLayouts are the forms a time filter takes: RFC 3339, and what a
// browser's datetime-local input sends, read as UTC.
var whenLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseWhen reads the time filter field; "" is no bound.
func parseWhen(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range whenLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: %q is not a time; write 2026-12-05T03:12:00Z (RFC 3339) or 2026-12-05T03:12 (UTC)", field, clip(s, 40))
}

// runData is a run's page: the run, and the replay shown beside it.
type runData struct {
	Run    runView
	Beside *runView
	// Problem says why the run beside could not be shown.
	Problem string
}

// runView is one run record as the page shows it.
type runView struct {
	Record   *host.RunRecord
	Took     time.Duration
	Timeline timeline
}

func (c *Console) run(w http.ResponseWriter, r *http.Request) {
	c.withHost(w, r, func(ctx context.Context, b Backend) {
		rec, err := c.visibleRun(ctx, r, b, r.PathValue("run"))
		if err != nil {
			c.renderProblem(w, "No such run", err)
			return
		}
		d := runData{Run: newRunView(rec)}
		if beside := r.URL.Query().Get("beside"); beside != "" {
			rec, err := c.visibleRun(ctx, r, b, beside)
			if err != nil {
				d.Problem = wop.AsError(err).Message
			} else {
				v := newRunView(rec)
				d.Beside = &v
			}
		}
		c.render(w, http.StatusOK, "run.html", d)
	})
}

// visibleRun returns the record of runID when r's credential may see
// it; one it may not is not found, as a missing one is, so that a page
// does not tell which runs exist.
func (c *Console) visibleRun(ctx context.Context, r *http.Request, b Backend, runID string) (*host.RunRecord, error) {
	notFound := wop.Errorf(wop.CodeNotFound, "no run %s", clip(runID, 100))
	if !host.IsRunID(runID) {
		return nil, notFound
	}
	rec, err := b.RunRecord(ctx, runID)
	if err != nil {
		if wop.CodeOf(err) != host.CodeRunExpired && errors.Is(err, fs.ErrNotExist) {
			return nil, notFound
		}
		return nil, err
	}
	if owner, all := c.opts.Access.RunScope(r); !all && rec.Owner != owner {
		return nil, notFound
	}
	return rec, nil
}

func newRunView(rec *host.RunRecord) runView {
	return runView{Record: rec, Took: rec.FinishedAt.Sub(rec.StartedAt), Timeline: newTimeline(rec)}
}

// promptsData is the prompts page.
type promptsData struct {
	Served  bool
	Problem string
	Names   []promptlibrary.NameSummary
}

// library returns the prompt library client of b, the operator's.
func library(b Backend) *promptlibrary.Client {
	return promptlibrary.NewClient(host.AsOperator(b), nil)
}

func (c *Console) prompts(w http.ResponseWriter, r *http.Request) {
	c.withHost(w, r, func(ctx context.Context, b Backend) {
		d := promptsData{Served: b.Registry().Has(wop.FamilyPromptLibrary, "")}
		if d.Served {
			names, err := library(b).List(ctx)
			if err != nil {
				d.Problem = wop.AsError(err).Message
			}
			d.Names = names
		}
		c.render(w, http.StatusOK, "prompts.html", d)
	})
}

// promptData is one prompt name's page: its versions and one version's
// bytes.
type promptData struct {
	Name     string
	Versions []promptlibrary.Version
	Shown    *promptlibrary.Prompt
	Problem  string
}

func (c *Console) prompt(w http.ResponseWriter, r *http.Request) {
	c.withHost(w, r, func(ctx context.Context, b Backend) {
		name := r.PathValue("name")
		if err := promptlibrary.CheckName(name); err != nil {
			c.renderProblem(w, "No such prompt", wop.Errorf(wop.CodeNotFound, "%v", err))
			return
		}
		if !b.Registry().Has(wop.FamilyPromptLibrary, "") {
			c.renderProblem(w, "No prompt library", wop.Errorf(wop.CodeNotFound, "this host serves no promptLibrary"))
			return
		}
		lib := library(b)
		versions, err := lib.Versions(ctx, name)
		if err != nil {
			c.renderProblem(w, "No such prompt", err)
			return
		}
		d := promptData{Name: name, Versions: versions}
		if len(versions) == 0 {
			c.render(w, http.StatusOK, "prompt.html", d)
			return
		}
		shown := versions[len(versions)-1]
		if want := r.URL.Query().Get("version"); want != "" {
			i := slices.IndexFunc(versions, func(v promptlibrary.Version) bool { return v.Version == want })
			if i < 0 {
				c.renderProblem(w, "No such version", wop.Errorf(wop.CodeNotFound, "%s has no version %q", name, clip(want, 60)))
				return
			}
			shown = versions[i]
		}
		p, err := lib.Get(ctx, &promptlibrary.GetRequest{PromptID: shown.Pin().String()})
		if err != nil {
			d.Problem = wop.AsError(err).Message
		}
		d.Shown = p
		c.render(w, http.StatusOK, "prompt.html", d)
	})
}

// agentsData is the agents page: the registry of agent manifests and the
// runtime's instances.
type agentsData struct {
	Served   bool
	Registry []*agents.Entry
	Runtime  *agentInstances
}

func (c *Console) agents(w http.ResponseWriter, r *http.Request) {
	c.withHost(w, r, func(ctx context.Context, b Backend) {
		d := agentsData{Served: b.Registry().Has(wop.FamilyAgents, ""), Registry: b.Agents()}
		if b.Registry().Has(wop.FamilyAgentRuntime, "") {
			d.Runtime = listInstances(ctx, b, r.URL.Query().Get("after"))
		}
		c.render(w, http.StatusOK, "agents.html", d)
	})
}

func (c *Console) packs(w http.ResponseWriter, r *http.Request) {
	c.withHost(w, r, func(_ context.Context, b Backend) {
		packs := b.Packs()
		slices.SortFunc(packs, func(a, b host.PackInfo) int { return cmp.Compare(a.Name, b.Name) })
		c.render(w, http.StatusOK, "packs.html", packs)
	})
}

func (c *Console) pack(w http.ResponseWriter, r *http.Request) {
	c.withHost(w, r, func(_ context.Context, b Backend) {
		d, ok := b.PackDetail(r.PathValue("name"))
		if !ok {
			c.renderProblem(w, "No such pack", wop.Errorf(wop.CodeNotFound, "this host declares no pack %q", clip(r.PathValue("name"), 100)))
			return
		}
		c.render(w, http.StatusOK, "pack.html", d)
	})
}
