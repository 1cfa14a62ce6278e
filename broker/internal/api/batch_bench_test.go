package api

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecodeBatch decodes a 100-record batch of 1 KiB text payloads (the bench shape).
func BenchmarkDecodeBatch(b *testing.B) {
	payload := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 29)[:1024]
	var sb strings.Builder
	sb.WriteString(`{"records":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"key":"k%d","payload":%q}`, i, payload)
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		recs, err := decodeBatch(body)
		if err != nil || len(recs) != 100 {
			b.Fatal(err)
		}
	}
}
