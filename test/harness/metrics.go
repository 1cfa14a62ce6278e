package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Sample is one line of a Prometheus text exposition.
type Sample struct {
	Name   string            // full sample name, e.g. narad_x_bucket
	Labels map[string]string // label name → value
	Value  float64
}

// Family is one metric family as exposed: its # HELP / # TYPE lines and its samples.
// A family printed without any sample (a labelled vector with no series) has none.
type Family struct {
	Name    string
	Help    string
	Type    string // counter, gauge, histogram, summary, untyped
	HasHelp bool
	Samples []Sample
}

// LabelNames returns the sorted label names used by the family's samples (without the
// histogram/summary "le"/"quantile" labels), one entry per distinct set, joined by ",".
func (f *Family) LabelNames() []string {
	seen := map[string]bool{}
	for _, s := range f.Samples {
		var names []string
		for k := range s.Labels {
			if k == "le" || k == "quantile" {
				continue
			}
			names = append(names, k)
		}
		sort.Strings(names)
		seen[strings.Join(names, ",")] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Exposition is a parsed /metrics page keyed by family name.
type Exposition map[string]*Family

// Value returns the sum of the family's samples named exactly name whose labels include
// every pair of match, and whether any sample matched.
func (e Exposition) Value(name string, match map[string]string) (float64, bool) {
	fam := e.familyOf(name)
	if fam == nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, s := range fam.Samples {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			sum += s.Value
			found = true
		}
	}
	return sum, found
}

func (e Exposition) familyOf(sample string) *Family {
	if f := e[sample]; f != nil {
		return f
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(sample, suf); ok {
			if f := e[base]; f != nil {
				return f
			}
		}
	}
	return nil
}

// ScrapeMetrics fetches and parses GET <baseURL>/metrics (no credentials).
func ScrapeMetrics(ctx context.Context, baseURL string) (Exposition, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	return ParseExposition(body)
}

// ParseExposition parses the Prometheus text format (version 0.0.4) as client_golang
// writes it: # HELP and # TYPE lines followed by the family's samples.
func ParseExposition(text []byte) (Exposition, error) {
	exp := Exposition{}
	get := func(name string) *Family {
		f := exp[name]
		if f == nil {
			f = &Family{Name: name, Type: "untyped"}
			exp[name] = f
		}
		return f
	}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(l, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			f := get(name)
			f.Help, f.HasHelp = help, true
			continue
		}
		if rest, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			get(name).Type = strings.TrimSpace(typ)
			continue
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		s, err := parseSample(l)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w: %q", line, err, l)
		}
		fam := exp.familyOf(s.Name)
		if fam == nil {
			fam = get(s.Name)
		}
		fam.Samples = append(fam.Samples, s)
	}
	return exp, sc.Err()
}

func parseSample(l string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(l, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name = l[:i]
	rest := l[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if rest == "" {
				return s, fmt.Errorf("unterminated labels")
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || eq+1 >= len(rest) || rest[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			name := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				ch := rest[j]
				if ch == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				if ch == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				val.WriteByte(ch)
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value")
			}
			s.Labels[name] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("bad value: %w", err)
	}
	s.Value = v
	return s, nil
}
