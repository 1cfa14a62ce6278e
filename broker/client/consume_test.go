package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestConsumeNoContentReturnsNil(t *testing.T) {
	f := newFake(t, http.StatusNoContent, "")
	msgs, err := f.client(t).Consume(context.Background(), "orders", ConsumeOptions{Wait: 10 * time.Second})
	if err != nil || msgs != nil {
		t.Fatalf("got %v, %v; want nil, nil", msgs, err)
	}
	if q := f.last(t).Query; q.Get("wait") != "10s" || q.Has("max_messages") {
		t.Fatalf("query = %v", q)
	}
}

func TestConsumeSingleObjectWhenMaxUnset(t *testing.T) {
	f := newFake(t, 200, `{"topic":"orders","partition":1,"offset":5,"payload":"hi","timestamp":1700000000,"receipt_handle":"1:5:9"}`+"\n")
	for _, max := range []int{0, 1} {
		msgs, err := f.client(t).Consume(context.Background(), "orders", ConsumeOptions{Max: max})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || msgs[0].Offset != 5 || msgs[0].ReceiptHandle != "1:5:9" {
			t.Fatalf("max %d: got %+v", max, msgs)
		}
		if q := f.last(t).Query; q.Has("max_messages") || q.Has("wait") {
			t.Fatalf("max %d: query = %v", max, q)
		}
	}
}

func TestConsumeMaxMessagesSendsParamAndDecodesList(t *testing.T) {
	f := newFake(t, 200, `{"messages":[{"topic":"t","partition":0,"offset":1,"payload":{"a":1},"timestamp":1,"receipt_handle":"0:1:1"},`+
		`{"topic":"t","partition":2,"offset":7,"payload":"AA==","payload_encoding":"base64","timestamp":2,"receipt_handle":"2:7:3"}]}`)
	msgs, err := f.client(t).Consume(context.Background(), "t", ConsumeOptions{Max: 50, Wait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[1].Partition != 2 || msgs[1].PayloadEncoding != "base64" {
		t.Fatalf("got %+v", msgs)
	}
	if q := f.last(t).Query; q.Get("max_messages") != "50" || q.Get("wait") != "500ms" {
		t.Fatalf("query = %v", q)
	}
}

func TestConsumeReplaySendsPartitionAndOffset(t *testing.T) {
	f := newFake(t, 200, `{"topic":"t","partition":3,"offset":0,"payload":1,"timestamp":1}`)
	msgs, err := f.client(t).Consume(context.Background(), "t", ConsumeOptions{Partition: ptr(3), Offset: ptr(int64(0))})
	if err != nil || len(msgs) != 1 || msgs[0].ReceiptHandle != "" {
		t.Fatalf("got %+v, %v", msgs, err)
	}
	if q := f.last(t).Query; q.Get("partition") != "3" || q.Get("offset") != "0" {
		t.Fatalf("query = %v", q)
	}
	if _, err := f.client(t).Consume(context.Background(), "t", ConsumeOptions{Offset: ptr(int64(1))}); !errors.Is(err, ErrOffsetWithoutPartition) {
		t.Fatalf("offset without partition: err = %v", err)
	}
}

func TestConsumeReplayGoneIsError410(t *testing.T) {
	f := newFake(t, 410, `{"error":"offset aged out"}`)
	_, err := f.client(t).Consume(context.Background(), "t", ConsumeOptions{Partition: ptr(0), Offset: ptr(int64(0))})
	if !IsStatus(err, 410) {
		t.Fatalf("err = %v", err)
	}
}

func TestHandlesAreURLEncodedInQueries(t *testing.T) {
	f := newFake(t, http.StatusNoContent, "")
	c := f.client(t)
	handle := "1:2:3+a&b=c/d %x?"
	ops := []struct {
		name   string
		call   func() error
		extend string
		has    bool
	}{
		{"ack", func() error { return c.Ack(context.Background(), "t", handle) }, "", false},
		{"extend", func() error { return c.Extend(context.Background(), "t", handle) }, "true", true},
		{"nack", func() error { return c.Nack(context.Background(), "t", handle) }, "0", true},
	}
	for _, op := range ops {
		if err := op.call(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		s := f.last(t)
		if s.Method != "POST" || s.Path != "/v1/topics/t/ack" {
			t.Fatalf("%s: %s %s", op.name, s.Method, s.Path)
		}
		if got := s.Query.Get("receipt_handle"); got != handle {
			t.Fatalf("%s: handle arrived as %q", op.name, got)
		}
		if s.Query.Has("extend") != op.has || s.Query.Get("extend") != op.extend {
			t.Fatalf("%s: extend = %v", op.name, s.Query["extend"])
		}
	}
}

func TestAckLeaseLapsedIs410(t *testing.T) {
	f := newFake(t, 410, `{"error":"no live reservation"}`)
	if err := f.client(t).Ack(context.Background(), "t", "0:1:1"); !IsStatus(err, 410) {
		t.Fatalf("err = %v", err)
	}
}

func TestAckBatchSendsEntriesAndReturnsResultsInOrder(t *testing.T) {
	f := newFake(t, 200, `{"results":[{"status":204},{"status":410,"error":"lease expired"},{"status":503,"error":"window full"}]}`)
	res, err := f.client(t).AckBatch(context.Background(), "t", []AckEntry{
		{ReceiptHandle: "0:1:1"}, {ReceiptHandle: "0:2:1", Extend: AckExtend}, {ReceiptHandle: "0:3:1", Extend: AckNack}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || !res[0].OK() || res[1].Status != 410 || res[2].Status != 503 || res[2].Error != "window full" {
		t.Fatalf("results = %+v", res)
	}
	s := f.last(t)
	if s.Path != "/v1/topics/t/ack/batch" {
		t.Fatalf("path %s", s.Path)
	}
	var body struct {
		Acks []map[string]string `json:"acks"`
	}
	if err := json.Unmarshal([]byte(s.Body), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Acks) != 3 || len(body.Acks[0]) != 1 || body.Acks[1]["extend"] != "true" || body.Acks[2]["extend"] != "0" {
		t.Fatalf("body = %s", s.Body)
	}
}

func TestAckBatchRejectsResultCountMismatch(t *testing.T) {
	f := newFake(t, 200, `{"results":[{"status":204}]}`)
	if _, err := f.client(t).AckBatch(context.Background(), "t", []AckEntry{{ReceiptHandle: "a"}, {ReceiptHandle: "b"}}); err == nil {
		t.Fatal("mismatched result count accepted")
	}
}

func FuzzDecodeConsume(f *testing.F) {
	f.Add([]byte(`{"topic":"t","payload":1}`))
	f.Add([]byte(`{"messages":[{"topic":"t","payload":"x"}]}`))
	f.Add([]byte(`{"messages":[]}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := decodeConsume(body)
		if err == nil && msgs != nil && len(msgs) == 0 {
			t.Fatal("empty non-nil slice returned")
		}
	})
}
