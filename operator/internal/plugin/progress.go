package plugin

import (
	"io"
	"strings"

	"github.com/schollz/progressbar/v3"
)

// barWidth is the width of a progress bar between its brackets, in characters.
const barWidth = 30

// progressBar renders one fixed state of a progress bar, done of total, as a single line such as
// "  40% [===========>..................]". The bar is drawn by schollz/progressbar into a
// discarded writer (so no terminal control characters reach the output) and read back with
// String(); time prediction and rates are off, so the same numbers always give the same line,
// on a terminal or not. total <= 0 means there was nothing to do: a full bar.
func progressBar(done, total int64) string {
	if total <= 0 {
		done, total = 1, 1
	}
	done = min(max(done, 0), total)
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(io.Discard),
		progressbar.OptionSetWidth(barWidth),
		progressbar.OptionSetTheme(progressbar.ThemeASCII),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(false),
		progressbar.OptionEnableColorCodes(false),
		progressbar.OptionShowTotalBytes(false),
	)
	if done == 0 {
		_ = bar.RenderBlank()
	} else {
		_ = bar.Set64(done)
	}
	return strings.TrimRight(strings.TrimLeft(bar.String(), "\r"), " ")
}
