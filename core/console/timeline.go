package console

import (
	"slices"
	"time"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/host"
)

// timeline is a run's invocation log laid out in time: one row per call,
// in the order the calls arrived, each bar placed at the call's start
// within the run and as long as it took.
type timeline struct {
	Rows []timelineRow
	// Width and Height are the drawing's viewBox; LabelWidth is the
	// left part that holds the calls' names.
	Width, Height, LabelWidth float64
	// Span is the time the drawing covers: the run's, or longer when a
	// call outlived it (a plugin's callback reported late).
	Span time.Duration
	// Truncated and Dropped say the log was cut at its bounds.
	Truncated bool
	Dropped   int
	CutReason string
	// Replay is the replay's summary on a replay's record.
	Replay *dispatch.ReplaySummary
}

// timelineRow is one call.
type timelineRow struct {
	dispatch.Invocation
	// Offset is when the call started, from the run's start.
	Offset time.Duration
	Took   time.Duration
	// X, W and Y place the call's bar, TextY its label.
	X, W, Y, TextY float64
	// Code is the call's error code, "ok" when it succeeded.
	Code string
	// Diverged is the reason a replay diverged at this call, if it did.
	Diverged string
}

// Timeline drawing sizes, in viewBox units.
const (
	timelineWidth      = 640
	timelineLabelWidth = 200
	timelineRowHeight  = 22
	timelineMinBar     = 2
)

func newTimeline(rec *host.RunRecord) timeline {
	t := timeline{Width: timelineWidth, LabelWidth: timelineLabelWidth, Replay: rec.Replay}
	if rec.Invocations == nil {
		return t
	}
	log := rec.Invocations
	t.Truncated, t.Dropped, t.CutReason = log.Truncated, log.Dropped, log.CutReason
	calls := slices.Clone(log.Calls)
	slices.SortStableFunc(calls, func(a, b dispatch.Invocation) int { return a.Seq - b.Seq })
	diverged := map[int]string{}
	if rec.Replay != nil {
		for _, d := range rec.Replay.Divergences {
			if d.Seq > 0 {
				diverged[d.Seq] = d.Reason
			}
		}
	}
	t.Span = rec.FinishedAt.Sub(rec.StartedAt)
	for _, c := range calls {
		end := c.StartedAt.Sub(rec.StartedAt) + time.Duration(c.DurationMicros)*time.Microsecond
		t.Span = max(t.Span, end)
	}
	if t.Span <= 0 {
		t.Span = time.Microsecond
	}
	scale := (timelineWidth - timelineLabelWidth - 10) / float64(t.Span)
	for i, c := range calls {
		row := timelineRow{Invocation: c, Offset: max(0, c.StartedAt.Sub(rec.StartedAt)),
			Took: time.Duration(c.DurationMicros) * time.Microsecond, Code: "ok", Diverged: diverged[c.Seq]}
		if c.Error != nil {
			row.Code = c.Error.Code
		}
		row.X = timelineLabelWidth + float64(row.Offset)*scale
		row.W = max(timelineMinBar, float64(row.Took)*scale)
		row.Y = float64(i)*timelineRowHeight + 4
		row.TextY = row.Y + 13
		t.Rows = append(t.Rows, row)
	}
	t.Height = float64(len(t.Rows))*timelineRowHeight + 8
	return t
}
