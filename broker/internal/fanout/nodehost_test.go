package fanout

import (
	"context"
	"testing"

	"narad.dev/broker/internal/credseal"
	"narad.dev/broker/internal/hostlist"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
)

func testKey(t *testing.T, secret string) *credseal.Key {
	t.Helper()
	k, err := credseal.DeriveKey([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A sealed password this node cannot open (another cluster secret) makes the link
// unauthorized without a request to the target; a host off the allow-list is never asked.
func TestRemoteSenderRefusesWhatItMustNotSend(t *testing.T) {
	key := testKey(t, "test-cluster-secret")
	allowed, err := hostlist.Parse([]string{"narad-dr.example:7942"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		mod   func(*NodeConfig)
		state string
	}{
		{"another cluster secret", func(c *NodeConfig) { c.LinkKey = testKey(t, "another-secret") }, RemoteUnauthorized},
		{"host off the allow-list", func(c *NodeConfig) { c.RemoteAllowedHosts = allowed }, RemoteNotAllowedHost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := NodeConfig{LinkKey: key}
			tc.mod(&cfg)
			l := meta.RemoteLink{Parent: "p", ID: "remote:t@127.0.0.1:9", URLs: []string{"http://127.0.0.1:9"}, Topic: "t", User: "u"}
			l.PasswordSealed, err = key.Seal("secret-pw-7", meta.SealAAD(l.Parent, l.ID))
			if err != nil {
				t.Fatal(err)
			}
			_, err := NewSender(*NewNodeHost(cfg).remoteTarget(l), nil).Send(context.Background(), 0, []plog.Entry{{Payload: []byte("x")}})
			if StateOf(err) != tc.state {
				t.Fatalf("send: %v, want state %s", err, tc.state)
			}
		})
	}
}
