// Package controllerlease is what the application-grid-controller and
// `kubectl grid doctor` share about the controller's leader-election Lease:
// the flags' defaults, and the labels on which the controller publishes its
// release and the CRD schemas it was built with. Its own package because
// gridcli cannot import the controller (the controller's tests run kubectl
// grid).
package controllerlease

import (
	"regexp"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The defaults of the controller's --leader-elect, --leader-elect-namespace
// and --leader-elect-name.
const (
	DefaultLeaderElect = true
	DefaultNamespace   = "kube-system"
	DefaultName        = "application-grid-controller"
)

const (
	// VersionLabel carries the leading controller's release.
	VersionLabel = "servicegroup.io/controller-version"
	// CRDLabelPrefix + a CRD's name carries the fingerprint
	// (crds.Fingerprint) of the schema the controller was built with.
	CRDLabelPrefix = "crd.servicegroup.io/"
)

// Labels are what the controller puts on its Lease (at every renewal:
// client-go's LeaseLock.Labels).
func Labels(version string, crdFingerprints map[string]string) map[string]string {
	l := map[string]string{VersionLabel: labelValue(version)}
	for name, fp := range crdFingerprints {
		l[CRDLabelPrefix+name] = fp
	}
	return l
}

// Published is what a Lease's labels say about the controller holding it.
type Published struct {
	Version string
	// CRDs are fingerprints by CRD name.
	CRDs map[string]string
}

// Read returns what the controller published on lease; false if it
// published nothing (an older release, or a Lease another program wrote).
func Read(lease *coordinationv1.Lease) (Published, bool) {
	p := Published{CRDs: map[string]string{}}
	for k, v := range lease.Labels {
		if name, ok := strings.CutPrefix(k, CRDLabelPrefix); ok {
			p.CRDs[name] = v
		}
	}
	p.Version = lease.Labels[VersionLabel]
	return p, p.Version != "" && len(p.CRDs) > 0
}

var notInLabelValue = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// labelValue fits a version into a label value ("v1.2.3+meta" becomes
// "v1.2.3_meta").
func labelValue(s string) string {
	s = notInLabelValue.ReplaceAllString(s, "_")
	if len(s) > validation.LabelValueMaxLength {
		s = s[:validation.LabelValueMaxLength]
	}
	s = strings.Trim(s, "_.-")
	if s == "" {
		return "unknown"
	}
	return s
}
