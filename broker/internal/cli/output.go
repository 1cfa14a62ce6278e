package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// printJSON pretty-prints v (two-space indent, no HTML escaping) followed by a newline.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseDurationMs parses a duration flag into milliseconds: Go syntax ("30s", "12h"), a "d"
// suffix for whole days ("7d"), or "0"/"forever" for zero. Negative values are rejected.
func parseDurationMs(s string) (int64, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "0", "forever":
		return 0, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days < 0 || days > 365*100 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return days * 24 * 3600 * 1000, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use Go syntax such as 30s, 12h, or 7d)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: negative", s)
	}
	return d.Milliseconds(), nil
}

// formatMs renders a millisecond duration compactly: "forever" for 0, else the largest whole
// unit among d, h, m, s, ms.
func formatMs(ms int64) string {
	if ms == 0 {
		return "forever"
	}
	units := []struct {
		n    int64
		name string
	}{{86_400_000, "d"}, {3_600_000, "h"}, {60_000, "m"}, {1000, "s"}}
	for _, u := range units {
		if ms%u.n == 0 {
			return strconv.FormatInt(ms/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

// humanBytes renders a byte count with binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
