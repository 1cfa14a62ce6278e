package lagmetric

import "testing"

func TestParseReadsOnlyTheTopicsSeries(t *testing.T) {
	text := []byte(`# HELP narad_consumer_lag_messages hwm - (committed frontier + 1).
# TYPE narad_consumer_lag_messages gauge
narad_consumer_lag_messages{partition="0",topic="orders"} 12
narad_consumer_lag_messages{partition="2",topic="orders"} 3
narad_consumer_lag_messages{partition="0",topic="orders-audit"} 99
# TYPE narad_consumer_lag_messages_other gauge
narad_consumer_lag_messages_other{partition="1",topic="orders"} 5
`)
	got := Parse(text, "orders")
	if len(got) != 2 || got[0] != 12 || got[2] != 3 {
		t.Fatalf("Parse = %v", got)
	}
	// An exposition the parser refuses yields nothing (the caller then uses its upper bound).
	broken := append(append([]byte(nil), text...), []byte("narad_consumer_lag_messages{partition=\"1\",topic=\"orders\"} \n")...)
	if got := Parse(broken, "orders"); len(got) != 0 {
		t.Fatalf("Parse of a malformed exposition = %v, want nothing", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("# TYPE narad_consumer_lag_messages gauge\nnarad_consumer_lag_messages{partition=\"0\",topic=\"orders\"} 12\n"), "orders")
	f.Add([]byte("narad_consumer_lag_messages{partition=\"-1\",topic=\"orders\"} NaN\n"), "orders")
	f.Add([]byte("narad_consumer_lag_messages{partition=\"3\",topic=\"o\"} 1e300\n"), "o")
	f.Fuzz(func(t *testing.T, text []byte, topic string) {
		for p, v := range Parse(text, topic) {
			if p < 0 || v < 0 {
				t.Fatalf("Parse gave partition %d = %d", p, v)
			}
		}
	})
}
