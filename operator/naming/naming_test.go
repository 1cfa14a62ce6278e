package naming

import (
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
)

func TestOrdinalRoundTripsPodNamesAndRefusesOthers(t *testing.T) {
	nc := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: "narad", Namespace: "q"}}
	for _, o := range []int32{0, 1, 9, 10, 123} {
		if got, ok := Ordinal(nc, PodName(nc, o)); !ok || got != o {
			t.Fatalf("Ordinal(PodName(%d)) = %d, %v", o, got, ok)
		}
	}
	for _, id := range []string{"narad", "narad-", "narad-01", "narad--1", "narad-x", "other-1", "narad-1-2"} {
		if o, ok := Ordinal(nc, id); ok {
			t.Fatalf("Ordinal(%q) = %d, want refused", id, o)
		}
	}
	if got := PodHost(nc, 2); got != "narad-2.narad-headless.q.svc" {
		t.Fatalf("PodHost = %q", got)
	}
}

// Ordinal accepts exactly the names PodName produces.
func FuzzOrdinal(f *testing.F) {
	for _, s := range []string{"narad-0", "narad-12", "narad-012", "narad--3", "narad-2147483648", "x-1"} {
		f.Add(s)
	}
	nc := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: "narad"}}
	f.Fuzz(func(t *testing.T, id string) {
		o, ok := Ordinal(nc, id)
		if ok && (o < 0 || PodName(nc, o) != id) {
			t.Fatalf("Ordinal(%q) = %d, but PodName(%d) = %q", id, o, o, PodName(nc, o))
		}
	})
}

func TestTLSIsOffForAnEmptyTLSObject(t *testing.T) {
	nc := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	nc.Spec.TLS = &naradv1.TLSSpec{}
	if TLSEnabled(nc) || TLSSecret(nc) != "" || Scheme(nc) != "http" {
		t.Fatal("an empty tls object must leave TLS off")
	}
	nc.Spec.TLS.SecretName = "certs"
	if !TLSEnabled(nc) || TLSSecret(nc) != "certs" || Scheme(nc) != "https" {
		t.Fatal("tls.secretName must turn TLS on with that Secret")
	}
	nc.Spec.TLS = &naradv1.TLSSpec{CertManager: &naradv1.CertManagerTLS{IssuerRef: naradv1.IssuerReference{Name: "ca"}}}
	if TLSSecret(nc) != "n-tls" {
		t.Fatalf("cert-manager secret = %q", TLSSecret(nc))
	}
}

func TestParseScalePreview(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
		ok   bool
	}{
		{"3/abc", 3, true},
		{"12/x/y", 12, true},
		{"0/abc", 0, false},
		{"-1/abc", 0, false},
		{"3/", 0, false},
		{"3", 0, false},
		{"/abc", 0, false},
		{"three/abc", 0, false},
	} {
		got, err := ParseScalePreview(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseScalePreview(%q) = %d, %v", tc.in, got, err)
		}
	}
}

// Whatever a user writes in the annotation, the parser either refuses it or returns the
// replica count written before the slash, at least 1, with a non-empty request id after it.
func FuzzParseScalePreview(f *testing.F) {
	for _, s := range []string{"3/abc", "0/x", "-1/x", "3/", "/x", "3", "2147483648/x", "+4/y", "5/a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := ParseScalePreview(v)
		if err != nil {
			return
		}
		head, id, ok := strings.Cut(v, "/")
		want, perr := strconv.ParseInt(head, 10, 32)
		if !ok || id == "" || perr != nil || n < 1 || int64(n) != want {
			t.Fatalf("ParseScalePreview(%q) = %d, accepted a value it should refuse", v, n)
		}
	})
}

func TestRackNameGivesBrokerRackNames(t *testing.T) {
	long := strings.Repeat("n", 70)
	for in, want := range map[string]string{
		"eu-west-1a": "eu-west-1a", "zone/a b": "zone-a-b", "": "",
	} {
		if got := RackName(in); got != want {
			t.Errorf("RackName(%q) = %q, want %q", in, got, want)
		}
	}
	a, b := RackName(long), RackName(long+"x")
	if len(a) != MaxRackLen || len(b) != MaxRackLen || a == b {
		t.Fatalf("long names: %q %q", a, b)
	}
}

func FuzzRackName(f *testing.F) {
	f.Add("eu-west-1a")
	f.Add("ünïcode zone/with:colons")
	f.Fuzz(func(t *testing.T, s string) {
		r := RackName(s)
		if len(r) > MaxRackLen || (s != "" && r == "") {
			t.Fatalf("RackName(%q) = %q", s, r)
		}
		for _, c := range []byte(r) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				t.Fatalf("RackName(%q) = %q has %q", s, r, c)
			}
		}
	})
}
