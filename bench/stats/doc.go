// Package stats holds the statistics of kvlease's load generator:
// percentiles, summaries, rates, histograms and CDF points.
//
// It is PURE (see docs/design.md, "Pure cores, thin edges"): no I/O, no
// clock, no randomness. Every function takes its samples as values and
// never keeps or modifies the caller's slice, so results are reproducible
// and safe to compute from any goroutine holding its own copy.
//
// Samples are float64 in whatever unit the caller chose (the bench package
// uses seconds). NaN and ±Inf samples are ignored everywhere: a broken
// measurement must not poison a report, and "no data" is reported as a
// zero-count summary rather than as NaN so that reports encode as JSON.
package stats
