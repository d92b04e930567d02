package controller

import (
	"fmt"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridunit"
)

// templateName is the name of the template a nodeunit uses (the shared
// rule in package gridunit, which kubectl grid explains with).
func templateName(templates map[string]string, defaultName, value string) string {
	return gridunit.Template(templates, defaultName, value).Name
}

// unknownTemplateError: a nodeunit asks for a template the pool lacks. That
// nodeunit keeps its current child until the spec is fixed.
type unknownTemplateError struct {
	name string
}

func (e unknownTemplateError) Error() string {
	return fmt.Sprintf("template %q is neither %q nor an entry of spec.templatePool", e.name, superedgev1.DefaultTemplateName)
}

// pickTemplate returns the spec named name: main for "default" (or ""),
// else the pool's entry.
func pickTemplate[T any](main T, pool map[string]T, name string) (T, error) {
	if name == superedgev1.DefaultTemplateName || name == "" {
		return main, nil
	}
	t, ok := pool[name]
	if !ok {
		var zero T
		return zero, unknownTemplateError{name}
	}
	return t, nil
}
