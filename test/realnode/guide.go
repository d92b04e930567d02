package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The operator guides mark each shell block the test runs with a line
// `<!-- step: NAME -->` right before its ```sh fence; the test runs the
// block as written, so the guide and the test cannot drift apart.
const stepMarker = "<!-- step: "

// GuideSteps lists the names of the steps guide marks, in order.
func (o *Operator) GuideSteps(guide string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(o.Dir, guide))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), stepMarker); ok {
			names = append(names, strings.TrimSuffix(name, " -->"))
		}
	}
	return names, nil
}

// GuideStep returns the shell block marked `<!-- step: name -->` in guide
// (a path in the checkout, e.g. build/README.md), its indentation removed.
func (o *Operator) GuideStep(guide, name string) (string, error) {
	data, err := os.ReadFile(filepath.Join(o.Dir, guide))
	if err != nil {
		return "", err
	}
	lines := strings.Split(string(data), "\n")
	found := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == stepMarker+name+" -->" {
			if found >= 0 {
				return "", fmt.Errorf("%s: step %q marked twice", guide, name)
			}
			found = i
		}
	}
	if found < 0 || found+1 >= len(lines) || strings.TrimSpace(lines[found+1]) != "```sh" {
		return "", fmt.Errorf("%s: no ```sh block right after %s%s -->", guide, stepMarker, name)
	}
	indent := lines[found+1][:strings.Index(lines[found+1], "```")]
	var block []string
	for _, l := range lines[found+2:] {
		if strings.TrimSpace(l) == "```" {
			return strings.Join(block, "\n") + "\n", nil
		}
		block = append(block, strings.TrimPrefix(l, indent))
	}
	return "", fmt.Errorf("%s: step %q: block not closed", guide, name)
}

// RunStep runs the guide's step with sh -eu in the scratch checkout, the
// admin kubeconfig in KUBECONFIG, kubectl on PATH and env (e.g.
// NODE=node0) added: what an operator at a shell with the guide runs.
func (o *Operator) RunStep(ctx context.Context, guide, name string, env ...string) (string, error) {
	return o.RunStepOn(ctx, nil, guide, name, env...)
}

// RunStepOn is RunStep for a step the guide runs on a node: the shell
// starts through onNode (a command prefix entering the node's namespaces,
// e.g. Node.Enter), in the scratch checkout as a copy of it on the node.
// Substitutions replace the guide's placeholders (e.g. its example
// registry) with this run's values; the block is otherwise as written.
func (o *Operator) RunStepOn(ctx context.Context, onNode []string, guide, name string, env ...string) (string, error) {
	script, err := o.GuideStep(guide, name)
	if err != nil {
		return "", err
	}
	for from, to := range o.Substitutions {
		script = strings.ReplaceAll(script, from, to)
	}
	args := append(append([]string(nil), onNode...), "sh", "-eu", "-c", "cd \"$0\"\n"+script, o.Dir)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.Kubeconfig,
		"PATH="+filepath.Dir(o.Kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s, step %s (%s): %w:\n%s\n--- output:\n%s", guide, name, strings.Join(env, " "), err, script, out)
	}
	return string(out), nil
}
