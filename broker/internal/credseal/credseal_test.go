package credseal

import (
	"errors"
	"strings"
	"testing"
)

func mustKey(t testing.TB, secret string) *Key {
	t.Helper()
	k, err := DeriveKey([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealedValueHidesTheCredentialAndOpensOnlyForItsRecord(t *testing.T) {
	k := mustKey(t, "cluster-secret-1")
	const pw = "link-Secret-pw-7"
	s1, err := k.Seal(pw, "orders\x00remote:orders@dr-1:7942")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := k.Seal(pw, "orders\x00remote:orders@dr-1:7942")
	switch {
	case !IsSealed(s1) || strings.Contains(s1, pw):
		t.Fatalf("sealed value %q is not sealed or shows the password", s1)
	case s1 == s2:
		t.Fatal("two seals of one password are equal: the nonce is not fresh")
	}
	if got, err := k.Open(s1, "orders\x00remote:orders@dr-1:7942"); err != nil || got != pw {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := k.Open(s1, "other\x00remote:orders@dr-1:7942"); !errors.Is(err, ErrOpen) {
		t.Fatalf("Open for another record: %v, want ErrOpen", err)
	}
	if _, err := mustKey(t, "another-secret").Open(s1, "orders\x00remote:orders@dr-1:7942"); !errors.Is(err, ErrOpen) {
		t.Fatalf("Open under another cluster secret: %v, want ErrOpen", err)
	}
}

func TestOpenRefusesUnknownKeyIDAndMalformedValues(t *testing.T) {
	k := mustKey(t, "s")
	s, _ := k.Seal("pw", "a")
	id, nonce, ct, err := Decode(s)
	if err != nil || id != KeyV1 || len(nonce) != nonceLen || len(ct) != len("pw")+tagLen {
		t.Fatalf("Decode = %d %d %d %v", id, len(nonce), len(ct), err)
	}
	other := &Key{id: 2, aead: k.aead}
	s2, _ := other.Seal("pw", "a")
	if _, err := k.Open(s2, "a"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Open of key id 2: %v, want ErrNoKey", err)
	}
	for _, bad := range []string{"", "pw", Prefix, Prefix + "!!!", Prefix + "AAAA", Prefix + strings.Repeat("A", maxSealed)} {
		if _, err := k.Open(bad, "a"); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
	if _, err := DeriveKey(nil); err == nil {
		t.Error("DeriveKey(nil) succeeded")
	}
}

func FuzzDecode(f *testing.F) {
	k := mustKey(f, "fuzz")
	s, _ := k.Seal("password", "aad")
	f.Add(s)
	f.Add(Prefix)
	f.Add("plain")
	f.Fuzz(func(t *testing.T, v string) {
		id, nonce, ct, err := Decode(v)
		if err != nil {
			return
		}
		if len(nonce) != nonceLen || len(ct) < tagLen {
			t.Fatalf("Decode(%q) = %d, %d-byte nonce, %d-byte ciphertext", v, id, len(nonce), len(ct))
		}
		_, _ = k.Open(v, "aad")
	})
}
