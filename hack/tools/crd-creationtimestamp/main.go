// Command crd-creationtimestamp lets every embedded ObjectMeta schema in
// controller-gen's CRD manifests accept creationTimestamp (null or a time).
// kubectl, client-go before omitzero and SuperEdge's documented manifests
// write "creationTimestamp: null" into pod and claim templates; without the
// property, strict field validation (kubectl --validate=strict, server-side
// apply) rejects those manifests as having an unknown field.
//
// Usage: crd-creationtimestamp FILE...  (rewrites the files in place)
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	for _, f := range os.Args[1:] {
		if err := fix(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func fix(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(data), "\n")
	var out []string
	for i, l := range lines {
		if ind, ok := embeddedMetaFinalizers(lines, i); ok {
			out = append(out,
				ind+"creationTimestamp:",
				ind+"  description: Accepted and ignored (manifests often carry creationTimestamp null).",
				ind+"  format: date-time",
				ind+"  nullable: true",
				ind+"  type: string")
		}
		out = append(out, l)
	}
	return os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644)
}

// embeddedMetaFinalizers: line i is the "finalizers:" property of an object
// schema named "metadata" whose properties are an ObjectMeta's
// (annotations ... finalizers ... labels, name, namespace) and that lacks
// creationTimestamp. It returns the properties' indentation.
func embeddedMetaFinalizers(lines []string, i int) (string, bool) {
	l := lines[i]
	trimmed := strings.TrimLeft(l, " ")
	if trimmed != "finalizers:" {
		return "", false
	}
	ind := l[:len(l)-len(trimmed)]
	if len(ind) < 4 {
		return "", false
	}
	sawAnnotations := false
	for j := i - 1; j >= 0; j-- {
		lj := lines[j]
		t := strings.TrimLeft(lj, " ")
		n := len(lj) - len(t)
		switch {
		case n == len(ind) && t == "creationTimestamp:":
			return "", false
		case n == len(ind) && t == "annotations:":
			sawAnnotations = true
		case n == len(ind)-2:
			if t != "properties:" || !sawAnnotations || j == 0 {
				return "", false
			}
			for k := j - 1; k >= 0; k-- {
				lk := lines[k]
				tk := strings.TrimLeft(lk, " ")
				if len(lk)-len(tk) == len(ind)-4 {
					return ind, tk == "metadata:"
				}
			}
			return "", false
		case n < len(ind)-2 && t != "":
			return "", false
		}
	}
	return "", false
}
