package controller

import (
	"fmt"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// templateName is the name of the template a nodeunit uses, with SuperEdge's
// rule: its entry in templates, else defaultName; an empty name means
// "default", i.e. spec.template.
func templateName(templates map[string]string, defaultName, value string) string {
	name, ok := templates[value]
	if !ok {
		name = defaultName
	}
	if name == "" {
		return superedgev1.DefaultTemplateName
	}
	return name
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
