// Package release is the operator's release version and the version-skew policy it enforces on
// the brokers it runs (docs/kubernetes.md "Versions and upgrades"): operator N manages brokers of
// release N and N−1, where a release is a major.minor pair.
//
// Version must equal the repository's VERSION file and the chart's appVersion; release_test.go
// and hack/check-versions.sh check that they agree.
package release

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Version is this operator's release. The default broker and operator images are tagged with it.
const Version = "0.1.0"

// Images the operator runs when nothing else is configured, tagged with Version (never latest,
// so a node never runs a different build under the same name).
const (
	BrokerImage   = "ghcr.io/narad-dev/narad:" + Version
	OperatorImage = "ghcr.io/narad-dev/narad-operator:" + Version
)

// Reasons of a skew verdict (the NaradCluster's Ready condition carries them when refused).
const (
	ReasonSupported     = "VersionSupported"
	ReasonUnversioned   = "VersionUnchecked"
	ReasonTooOld        = "BrokerVersionTooOld"
	ReasonNewerThanOper = "BrokerVersionTooNew"
)

// ImageTag is the tag of an image reference ("" for none, or for a digest-only reference).
// "registry:5000/narad:0.1.0@sha256:…" has the tag "0.1.0".
func ImageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon <= slash {
		return ""
	}
	return image[colon+1:]
}

// CheckBroker is the skew policy for a broker image tag under operator release operatorVersion:
// a tag that is not a version (dev, a commit, a digest) is not checked; otherwise its
// major.minor must be the operator's or the one before it. "The one before" is minor−1 of the
// same major, or, for the first minor of a major (X.0), any minor of major X−1.
func CheckBroker(operatorVersion, tag string) (ok bool, reason, message string) {
	op, err := semver.StrictNewVersion(strings.TrimPrefix(operatorVersion, "v"))
	if err != nil {
		panic(fmt.Sprintf("release: operator version %q is not a version: %v", operatorVersion, err))
	}
	b, err := semver.StrictNewVersion(strings.TrimPrefix(tag, "v"))
	if err != nil {
		return true, ReasonUnversioned, fmt.Sprintf("broker image tag %q is not a release version; not checked against operator %s", tag, operatorVersion)
	}
	supported := fmt.Sprintf("operator %s manages brokers %s and %s", operatorVersion, minorOf(op), previousMinor(op))
	switch {
	case b.Major() > op.Major() || (b.Major() == op.Major() && b.Minor() > op.Minor()):
		return false, ReasonNewerThanOper, fmt.Sprintf("broker version %s is newer than the operator; %s: upgrade the operator first", tag, supported)
	case b.Major() == op.Major() && b.Minor() >= op.Minor():
		return true, ReasonSupported, supported
	case b.Major() == op.Major() && b.Minor()+1 == op.Minor():
		return true, ReasonSupported, supported
	case op.Minor() == 0 && b.Major()+1 == op.Major():
		return true, ReasonSupported, supported
	}
	return false, ReasonTooOld, fmt.Sprintf("broker version %s is older than N-1; %s: upgrade the brokers one release at a time with an older operator", tag, supported)
}

func minorOf(v *semver.Version) string { return fmt.Sprintf("%d.%d", v.Major(), v.Minor()) }

func previousMinor(v *semver.Version) string {
	if v.Minor() == 0 {
		if v.Major() == 0 {
			return "(none before 0.0)"
		}
		return fmt.Sprintf("%d.x", v.Major()-1)
	}
	return fmt.Sprintf("%d.%d", v.Major(), v.Minor()-1)
}
