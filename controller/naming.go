package controller

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridunit"
)

// maxStatefulSetNameLength leaves room in the controller-revision-hash label
// value "{statefulset}-{hash}" (a label value, at most 63 characters, with a
// hash of up to 10 characters) and so also in the pod hostname "{statefulset}-{ordinal}".
const maxStatefulSetNameLength = 52

// childName is the name of the child a grid keeps for one nodeunit (the
// shared rule in package gridunit).
func childName(grid, value string) string { return gridunit.ChildName(grid, value) }

// serviceName is the name of the one Service a ServiceGrid keeps.
func serviceName(grid string) string { return grid + "-svc" }

// validDeploymentName reports why name cannot name a Deployment.
func validDeploymentName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("must be a DNS-1123 subdomain of at most %d characters: %s",
			validation.DNS1123SubdomainMaxLength, strings.Join(errs, "; "))
	}
	return nil
}

// validStatefulSetName reports why name cannot name a StatefulSet whose pods
// and revisions the StatefulSet controller can name.
func validStatefulSetName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("must be a DNS-1123 label of at most %d characters (room for -{ordinal} and the controller-revision-hash label): %s",
			maxStatefulSetNameLength, strings.Join(errs, "; "))
	}
	if len(name) > maxStatefulSetNameLength {
		return fmt.Errorf("must be a DNS-1123 label of at most %d characters (room for -{ordinal} and the controller-revision-hash label), is %d",
			maxStatefulSetNameLength, len(name))
	}
	return nil
}

// validServiceName reports why name cannot name a Service.
func validServiceName(name string) error {
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return fmt.Errorf("must be a DNS-1035 label of at most %d characters: %s",
			validation.DNS1035LabelMaxLength, strings.Join(errs, "; "))
	}
	return nil
}

// validGrid reports why a grid's name or gridUniqKey cannot be used: the
// name ends up as a label value on every child, the key as a nodeSelector
// key (any label key, prefixed ones included: the grid-uniq-key label gets
// the shared encoding, the annotation the key itself).
func validGrid(name, key string) (reason string, err error) {
	if key == "" {
		return ReasonEmptyGridUniqKey, fmt.Errorf("spec.gridUniqKey is empty: it must name the node label whose values are the nodeunits")
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return ReasonInvalidGridUniqKey, fmt.Errorf("spec.gridUniqKey %q is not a valid label key: %s", key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
		return ReasonInvalidGridName, fmt.Errorf("grid name %q cannot be the value of label %s: %s",
			name, superedgev1.LabelGridSelector, strings.Join(errs, "; "))
	}
	return "", nil
}
