package client

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// serverShape renders n messages the way the broker writes a consume answer.
func serverShape(n int, payload string) []byte {
	var b strings.Builder
	if n > 1 {
		b.WriteString(`{"messages":[`)
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"topic":"bench","partition":%d,"offset":%d,"payload":%s,"timestamp":1700000000,"receipt_handle":"%d:%d:99"}`,
			i%3, 1000+i, payload, i%3, 1000+i)
	}
	if n > 1 {
		b.WriteString(`]}`)
	}
	b.WriteByte('\n')
	return []byte(b.String())
}

func TestDecodeConsumeFastTakesTheServerShape(t *testing.T) {
	for _, body := range [][]byte{
		serverShape(1, `"nbabc-xyz"`), serverShape(3, `"a\"b\\c\u00e9\n"`), []byte(`{"messages":[]}`),
		[]byte(`{"topic":"t","partition":0,"offset":0,"key":"k","payload":"aGk=","payload_encoding":"base64","timestamp":1,"receipt_handle":"0:0:1"}`),
	} {
		fast, ok := decodeConsumeFast(body)
		if !ok {
			t.Fatalf("fast path refused %s", body)
		}
		generic, err := decodeConsumeGeneric(body)
		if err != nil {
			t.Fatal(err)
		}
		if !sameMessages(fast, generic) {
			t.Fatalf("%s:\nfast    %+v\ngeneric %+v", body, fast, generic)
		}
	}
	msgs, _ := decodeConsumeFast(serverShape(3, `"x"`))
	if len(msgs) != 3 || msgs[2].ReceiptHandle != "2:1002:99" || msgs[1].Partition != 1 || msgs[2].Offset != 1002 {
		t.Fatalf("decoded %+v", msgs)
	}
}

func TestDecodeConsumeFastLeavesOtherShapesToTheGenericDecoder(t *testing.T) {
	for _, body := range []string{
		`{"topic":"t","payload":{"a":1}}`, `{"topic":"t\u0041"}`, `{"offset":1.5}`, `{"offset":1e3}`,
		`{"offset":01}`, `{"topic":"t","topic":"u"}`, `{"other":1}`, `{"messages":null}`, `[1]`,
		`{"topic":"t"} x`, `{"messages":[{}],"topic":"t"}`, `{"key":null}`, `{"topic":"é"}`,
	} {
		if _, ok := decodeConsumeFast([]byte(body)); ok {
			t.Errorf("fast path took %s", body)
		}
	}
}

func sameMessages(a, b []Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !bytes.Equal(x.Payload, y.Payload) {
			return false
		}
		x.Payload, y.Payload = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// FuzzConsumeFastPathMatchesGenericDecoder: whatever the fast path accepts, the generic decoder
// accepts too and decodes to the same messages.
func FuzzConsumeFastPathMatchesGenericDecoder(f *testing.F) {
	f.Add(serverShape(1, `"nbabc"`))
	f.Add(serverShape(2, `"a\"b\u00e9"`))
	f.Add([]byte(`{"messages":[]}`))
	f.Add([]byte(`{"topic":"t","partition":-1,"offset":-0,"key":"k","payload":"\ud83d","payload_encoding":"x","timestamp":9}`))
	f.Add([]byte("{\"payload\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := decodeConsumeFast(body)
		if !ok {
			return
		}
		generic, err := decodeConsumeGeneric(body)
		if err != nil {
			t.Fatalf("fast path took %q, generic decoder: %v", body, err)
		}
		if !sameMessages(fast, generic) {
			t.Fatalf("%q:\nfast    %+v\ngeneric %+v", body, fast, generic)
		}
	})
}

func BenchmarkDecodeConsume(b *testing.B) {
	payload := `"nb0123456789-` + strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 30)[:1011] + `"`
	body := serverShape(100, payload)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeConsume(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generic", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeConsumeGeneric(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
