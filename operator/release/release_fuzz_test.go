package release

import (
	"strings"
	"testing"
)

// FuzzImageTagAndSkew: spec.image is any string a user writes. The tag never spans a path or a
// digest, and the skew check answers every tag without panicking, refusing only with a reason.
func FuzzImageTagAndSkew(f *testing.F) {
	for _, s := range []string{"ghcr.io/narad-dev/narad:0.1.0", "narad", "r:5000/n", "n@sha256:ab", "n:v1.2.3-rc.1+b", ":", "a:b:c/d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, image string) {
		tag := ImageTag(image)
		if strings.ContainsAny(tag, "/@") {
			t.Fatalf("ImageTag(%q) = %q spans a path or digest", image, tag)
		}
		if tag != "" && !strings.HasSuffix(strings.SplitN(image, "@", 2)[0], ":"+tag) {
			t.Fatalf("ImageTag(%q) = %q is not the reference's tag", image, tag)
		}
		ok, reason, msg := CheckBroker(Version, tag)
		if msg == "" || (!ok && reason != ReasonTooOld && reason != ReasonNewerThanOper) {
			t.Fatalf("CheckBroker(%q) = %v %q %q", tag, ok, reason, msg)
		}
	})
}
