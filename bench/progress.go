package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// IsTerminal reports whether f is a terminal, where a progress bar can
// redraw itself; elsewhere (a pipe, a file, CI logs) use LineProgress.
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// TerminalProgress returns a Config.Progress that draws a progress bar on
// w: requests done out of Config.Requests, or else seconds out of
// Config.Duration, with live counts and rates.
func TerminalProgress(w io.Writer) func(Progress) {
	var (
		mu       sync.Mutex
		bar      *progressbar.ProgressBar
		finished bool
	)
	return func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		byTime := p.Total == 0
		if bar == nil {
			max, desc := int64(p.Total), "requests"
			if byTime {
				max, desc = int64(p.Duration/(100*time.Millisecond)), "time"
			}
			opts := []progressbar.Option{
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetWidth(30),
				progressbar.OptionSetDescription(desc),
				progressbar.OptionSetElapsedTime(true),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionSetRenderBlankState(true),
				progressbar.OptionShowDescriptionAtLineEnd(),
				progressbar.OptionSetTheme(progressbar.Theme{Saucer: "=", SaucerHead: ">", SaucerPadding: " ", BarStart: "[", BarEnd: "]"}),
			}
			if !byTime {
				opts = append(opts, progressbar.OptionShowCount())
			}
			bar = progressbar.NewOptions64(max, opts...)
		}
		bar.Describe(statusText(p))
		v := int64(p.Done)
		if byTime {
			v = min(int64(p.Elapsed/(100*time.Millisecond)), bar.GetMax64())
		}
		_ = bar.Set64(v)
		if p.Finished {
			// Not bar.Finish: it would fill the bar of an interrupted run.
			finished = true
			fmt.Fprintln(w)
		}
	}
}

// LineProgress returns a Config.Progress that writes one plain line to w
// at most every interval, and one at the end.
func LineProgress(w io.Writer, interval time.Duration) func(Progress) {
	var (
		mu   sync.Mutex
		last time.Duration = -interval
	)
	return func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if !p.Finished && p.Elapsed-last < interval {
			return
		}
		last = p.Elapsed
		of := ""
		switch {
		case p.Total > 0:
			of = fmt.Sprintf("/%d", p.Total)
		case p.Duration > 0:
			of = fmt.Sprintf(" (of %v)", p.Duration)
		}
		state := "running"
		if p.Finished {
			state = "finished"
		}
		fmt.Fprintf(w, "bench %s %6.1fs: done %d%s, %s\n", state, p.Elapsed.Seconds(), p.Done, of, statusText(p))
	}
}

func statusText(p Progress) string {
	secs := p.Elapsed.Seconds()
	var rps, tps float64
	if secs > 0 {
		rps, tps = float64(p.Done-p.Errors-p.Aborted-p.Rejected)/secs, float64(p.OutputTokens)/secs
	}
	rejected := ""
	if p.Rejected > 0 {
		rejected = fmt.Sprintf(", rejected %d", p.Rejected)
	}
	return fmt.Sprintf("in flight %d, errors %d, aborted %d%s | %.1f req/s, %.0f tok/s", p.Inflight, p.Errors, p.Aborted, rejected, rps, tps)
}
