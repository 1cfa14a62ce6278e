package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Output formats of -o. json and yaml print the same view the table shows, as a document.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

func (s *session) checkOutput() error {
	switch s.output {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return usagef("unknown output format %q: want table, json or yaml", s.output)
}

// structured reports whether the output is a document (json or yaml) rather than a table.
func (s *session) structured() bool { return s.output != outputTable }

// writeDoc prints v as JSON or YAML per the -o flag.
func (s *session) writeDoc(w io.Writer, v any) error {
	if s.output == outputYAML {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes tab-separated rows aligned in columns; flush prints them.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// humanBytes renders n bytes with binary units: "512 B", "1.5 KiB", "3.0 GiB".
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

// stamp renders a time as RFC 3339 in UTC, or "" for nil.
func stamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// within renders how far t lies after now, rounded to the second ("in 2m30s", or "due now" once passed).
func within(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return "due now"
	}
	return "in " + d.String()
}

func itoa[T ~int32 | ~int64 | ~int](n T) string { return fmt.Sprintf("%d", n) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
