package client

import (
	"math/rand"
	"testing"
)

// TestMalformedBodiesNeverPanicNorPoisonLaterDecodes feeds the generic decoder a long run of
// truncated and broken bodies, the kind after which goccy/go-json v0.10 panicked (FuzzDecodeConsume
// found `{"mes\` after a few thousand others), and checks every one is an error and a good body
// still decodes to the right value between them.
func TestMalformedBodiesNeverPanicNorPoisonLaterDecodes(t *testing.T) {
	bad := []string{`{"mes\`, `{"a\u`, `{"message`, `{"messages":[{"off\`, `{"pay`, `{"key":"\`,
		`{"messages":{`, `[`, `{"offset":"`, `{"messages":[{"offset":1,"payload":"x"}]}`}
	good := []byte(`{"messages":[{"topic":"t","partition":2,"offset":7,"payload":"hi","receipt_handle":"h"}]}`)
	r := rand.New(rand.NewSource(1))
	for i := range 50000 {
		b := []byte(bad[r.Intn(len(bad))])
		b = b[:r.Intn(len(b)+1)]
		func() {
			defer func() {
				if e := recover(); e != nil {
					t.Fatalf("body %d %q: panic %v", i, b, e)
				}
			}()
			if _, err := decodeConsumeGeneric(b); err == nil && (len(b) == 0 || b[len(b)-1] != '}') {
				t.Fatalf("body %d %q: decoded without an error", i, b)
			}
		}()
		if i%1000 == 0 {
			msgs, err := decodeConsumeGeneric(good)
			if err != nil || len(msgs) != 1 || msgs[0].Offset != 7 || msgs[0].Partition != 2 || msgs[0].ReceiptHandle != "h" {
				t.Fatalf("after %d malformed bodies a good one decoded to %+v, %v", i, msgs, err)
			}
		}
	}
}
