package mirror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/state"
)

// maxSamples bounds a campaign's burndown: the oldest samples go first.
const maxSamples = 1000

// Sample is a campaign's repositories counted by where they stand, at
// one time: what its burndown plots.
type Sample struct {
	At time.Time `json:"at"`
	// Done: its pull request merged and done_when passes on its default
	// branch. Merged: its pull request merged (and, with done_when, the
	// check does not pass yet, or no longer). Open: one is open. Closed: it
	// closed unmerged. NoChange: the work completed with nothing to
	// propose. Failed: failed or cancelled. ToDo: not finished yet.
	Done     int `json:"done,omitempty"`
	Merged   int `json:"merged"`
	Open     int `json:"open"`
	Closed   int `json:"closed"`
	NoChange int `json:"no_change"`
	Failed   int `json:"failed"`
	ToDo     int `json:"to_do"`
}

func (s Sample) same(o Sample) bool {
	s.At = o.At
	return s == o
}

// values are s's counts in the order burndownSeries names them.
func (s Sample) values() []int {
	return []int{s.Done, s.Merged, s.NoChange, s.Closed, s.Failed, s.Open, s.ToDo}
}

// burndownSeries are the series a burndown stacks, bottom up (done
// first, what is left on top), and their colours.
var burndownSeries = []struct{ name, colour string }{
	{"done", "#0969da"}, {"merged", "#8250df"}, {"no change", "#57ab5a"}, {"closed", "#8c959f"},
	{"failed", "#cf222e"}, {"open", "#1a7f37"}, {"to do", "#d4a72c"},
}

// countOf counts c's repositories.
func countOf(c state.Campaign, at time.Time) Sample {
	s := Sample{At: at.UTC().Truncate(time.Second)}
	for _, r := range c.Repos {
		switch {
		case r.PullRequestState == state.PullRequestMerged && r.PullRequest != nil && r.PullRequest.Done == state.DoneYes:
			s.Done++
		case r.PullRequestState == state.PullRequestMerged:
			s.Merged++
		case r.PullRequestState == state.PullRequestClosed:
			s.Closed++
		case r.PullRequestURL != "":
			s.Open++
		case r.Status == state.RepoFailed || r.Status == state.RepoCancelled:
			s.Failed++
		case r.Status == state.RepoCompleted || r.Status == state.RepoSkipped:
			s.NoChange++
		default:
			s.ToDo++
		}
	}
	return s
}

// BurndownPath is the path of a campaign's burndown samples and, with
// ext "svg", of its chart: campaigns/<id>.burndown.json and .svg.
func BurndownPath(id, ext string) string {
	return CampaignsDir + "/" + fileName(id) + ".burndown." + ext
}

// Burndown is campaign c's burndown: prev, its samples as the status
// branch had them (nil when none), with c counted at at added when the
// counts changed since the last sample; and its chart. Equal inputs give
// equal files.
func Burndown(prev []byte, c state.Campaign, at time.Time) (samples, svg []byte) {
	var all []Sample
	if len(prev) > 0 && json.Unmarshal(prev, &all) != nil {
		// Not what this writes: start again rather than stop the mirror.
		all = nil
	}
	now := countOf(c, at)
	if len(all) == 0 || !all[len(all)-1].same(now) {
		all = append(all, now)
	}
	if len(all) > maxSamples {
		all = all[len(all)-maxSamples:]
	}
	samples, _ = json.MarshalIndent(all, "", " ")
	return append(samples, '\n'), chart(c.ID, all)
}

// chart draws samples as stacked areas over time, with a legend of the
// latest counts: an SVG that GitHub and Gitea show in the campaign's page.
func chart(id string, samples []Sample) []byte {
	const w, h, left, right, top, bottom = 640.0, 260.0, 48.0, 150.0, 30.0, 30.0
	pw, ph := w-left-right, h-top-bottom
	last := samples[len(samples)-1]
	total := 0
	for _, s := range samples {
		sum := 0
		for _, v := range s.values() {
			sum += v
		}
		total = max(total, sum)
	}
	first, end := samples[0].At, last.At
	span := end.Sub(first)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return left + pw
		}
		return left + pw*float64(t.Sub(first))/float64(span)
	}
	y := func(v int) float64 {
		if total == 0 {
			return top + ph
		}
		return top + ph - ph*float64(v)/float64(total)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">%s: %d repositories</text>`+"\n", left, html.EscapeString(id), total)
	// Each series stacked on those below it, as steps: a count holds
	// until the next sample.
	below := make([]int, len(samples))
	for si, series := range burndownSeries {
		var topLine, bottomLine []string
		prevLo, prevHi := 0, 0
		for i, s := range samples {
			lo, hi := below[i], below[i]+s.values()[si]
			x0 := x(s.At)
			if i > 0 {
				// The step up or down at this sample.
				topLine = append(topLine, point(x0, y(prevHi)))
				bottomLine = append(bottomLine, point(x0, y(prevLo)))
			}
			topLine = append(topLine, point(x0, y(hi)))
			bottomLine = append(bottomLine, point(x0, y(lo)))
			below[i], prevLo, prevHi = hi, lo, hi
		}
		if len(samples) == 1 {
			// One sample: a bar the plot's width.
			topLine = append([]string{point(left, y(below[0]))}, topLine...)
			bottomLine = append([]string{point(left, y(below[0]-last.values()[si]))}, bottomLine...)
		}
		for i, j := 0, len(bottomLine)-1; i < j; i, j = i+1, j-1 {
			bottomLine[i], bottomLine[j] = bottomLine[j], bottomLine[i]
		}
		fmt.Fprintf(&b, `<polygon fill="%s" points="%s"/>`+"\n", series.colour, strings.Join(append(topLine, bottomLine...), " "))
		ly := top + 16*float64(si)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/>`+"\n", w-right+16, ly, series.colour)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s %d</text>`+"\n", w-right+32, ly+9, series.name, last.values()[si])
	}
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#57606a"/>`+"\n", left, top+ph, left+pw, top+ph)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#57606a"/>`+"\n", left, top, left, top+ph)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%d</text>`+"\n", left-6, top+4, total)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">0</text>`+"\n", left-6, top+ph+4)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", left, h-8, first.Format("2006-01-02 15:04 UTC"))
	if span > 0 {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", left+pw, h-8, end.Format("2006-01-02 15:04 UTC"))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func point(x, y float64) string { return fmt.Sprintf("%.1f,%.1f", x, y) }
