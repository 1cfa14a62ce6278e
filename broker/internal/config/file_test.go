package config

import (
	"strings"
	"testing"
)

// FuzzParseConfig: the config-file decoder never panics, accepts only known keys, and its
// errors render on one line.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("dev: true\njoin: [a:1, b:2]\nmax-consume-wait: 5s\n"), false)
	f.Add([]byte(`{"data-dir": "/d", "join": ["a:1"], "topic-max-partitions": 50}`), true)
	f.Add([]byte("a: &x 1\nb: *x\n"), false)
	f.Add([]byte("---\n...\n"), false)
	f.Add([]byte("segment-bytes: 1\n"), false)
	f.Add([]byte(`{"dev": true} []`), true)
	f.Add([]byte("- 1\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		kv, err := parseConfig(data, isJSON)
		if err != nil {
			if fe, ok := err.(*FieldError); ok && strings.Contains(fe.Error(), "\n") {
				t.Fatalf("multi-line error %q", fe.Error())
			}
			return
		}
		for k := range kv {
			if optionsByName[k] == nil || optionsByName[k].noFile {
				t.Fatalf("accepted key %q", k)
			}
		}
	})
}
