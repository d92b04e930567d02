// Package gridunit states, once, what each nodeunit of a workload grid gets:
// its child's name and the template it is built from, with the reason. The
// controller builds children with it and `kubectl grid status` explains them
// with it, so the two cannot disagree.
package gridunit

import (
	"fmt"
	"strings"
)

// DefaultTemplateName names spec.template (the same constant as the API's).
const DefaultTemplateName = "default"

// ChildName is the name of the child a grid keeps for one nodeunit: {grid}-{value}.
func ChildName(grid, value string) string { return grid + "-" + value }

// ValueOf reads ChildName back: the nodeunit value of child for grid, false
// unless child is exactly {grid}-{value} with a value. The grid's name is cut
// by length, never searched for, so a value that also occurs inside the
// grid's name (grid "nodeunit1-db" in nodeunit "nodeunit1") cannot confuse it.
func ValueOf(grid, child string) (string, bool) {
	rest, ok := strings.CutPrefix(child, grid)
	if !ok || len(rest) < 2 || rest[0] != '-' {
		return "", false
	}
	return rest[1:], true
}

// TemplateChoice is the template a nodeunit's child is built from and why.
type TemplateChoice struct {
	// Name is "default" (spec.template) or a spec.templatePool entry.
	Name string
	// Reason says which part of the spec decided it.
	Reason string
}

// Template applies SuperEdge's rule: the nodeunit's entry in templates,
// else defaultName; an empty name, wherever it comes from, means "default",
// i.e. spec.template (so `templates: {v: ""}` picks spec.template, not
// spec.defaultTemplateName).
func Template(templates map[string]string, defaultName, value string) TemplateChoice {
	if name, ok := templates[value]; ok {
		if name == "" {
			return TemplateChoice{DefaultTemplateName, fmt.Sprintf("spec.templates[%q] is empty: spec.template", value)}
		}
		return TemplateChoice{name, fmt.Sprintf("spec.templates[%q]", value)}
	}
	if defaultName == "" {
		return TemplateChoice{DefaultTemplateName, "not in spec.templates, spec.defaultTemplateName empty: spec.template"}
	}
	return TemplateChoice{defaultName, "not in spec.templates: spec.defaultTemplateName"}
}
