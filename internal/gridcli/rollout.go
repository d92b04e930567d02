package gridcli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/explain"
)

// newRolloutCommand is `kubectl grid rollout status|pause|resume|undo`,
// kubectl rollout for the progressive rollout of workload grids.
func newRolloutCommand(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:   "rollout (status|pause|resume|undo) (dg|ssg)/NAME",
		Short: "Follow, pause, resume or undo a grid's rollout across nodeunits (spec.rollout)",
	}
	var watch bool
	var timeout time.Duration
	status := &cobra.Command{
		Use:     "status (dg|ssg)/NAME",
		Short:   "Show the rollout's phase, wave and nodeunits; with --watch wait until it completes (exit 1 if it halts)",
		Example: "  kubectl grid rollout status dg/web\n  kubectl grid rollout status dg/web --watch=false",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return errUsage("--timeout must not be negative, got %s", timeout)
			}
			return o.rolloutGrid(cmd, args[0], func(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
				return o.rolloutStatus(ctx, ri, name, watch, timeout)
			})
		},
	}
	status.Flags().BoolVarP(&watch, "watch", "w", true, "Wait until the rollout is Complete or Halted.")
	status.Flags().DurationVar(&timeout, "timeout", 0, "Stop waiting after this long (0: no limit).")
	pause := &cobra.Command{
		Use: "pause (dg|ssg)/NAME", Short: "Set spec.rollout.paused: no further nodeunit changes", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.rolloutGrid(cmd, args[0], func(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
				return o.setPaused(ctx, ri, name, true)
			})
		},
	}
	resume := &cobra.Command{
		Use: "resume (dg|ssg)/NAME", Short: "Clear spec.rollout.paused", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.rolloutGrid(cmd, args[0], func(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
				return o.setPaused(ctx, ri, name, false)
			})
		},
	}
	var only string
	undo := &cobra.Command{
		Use:   "undo (dg|ssg)/NAME",
		Short: "Put each template's last good revision (status.rollout) back into the spec; the rollout then rolls it out",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.rolloutGrid(cmd, args[0], func(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
				return o.undo(ctx, ri, name, only)
			})
		},
	}
	undo.Flags().StringVar(&only, "template", "", `Undo only this template ("default": spec.template, else a templatePool entry).`)
	root.AddCommand(status, pause, resume, undo)
	return root
}

// rolloutGrid resolves dg/NAME or ssg/NAME and runs do on it.
func (o *options) rolloutGrid(cmd *cobra.Command, arg string, do func(context.Context, dynamic.ResourceInterface, string) error) error {
	kind, name, _ := strings.Cut(arg, "/")
	resource := gridKinds[strings.ToLower(kind)]
	if (resource != "deploymentgrids" && resource != "statefulsetgrids") || name == "" {
		return errUsage("want dg/NAME or ssg/NAME, got %q", arg)
	}
	c, err := o.clients()
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: superedgev1.GroupName, Version: "v1", Resource: resource}
	return do(cmd.Context(), c.dynamic.Resource(gvr).Namespace(c.namespace), name)
}

func (o *options) setPaused(ctx context.Context, ri dynamic.ResourceInterface, name string, paused bool) error {
	grid, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, ok, _ := unstructured.NestedMap(grid.Object, "spec", "rollout"); !ok {
		return fmt.Errorf("%s has no spec.rollout: its nodeunits are all updated at once, there is nothing to pause", name)
	}
	patch := fmt.Appendf(nil, `{"spec":{"rollout":{"paused":%t}}}`, paused)
	if _, err := ri.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	verb := "resumed"
	if paused {
		verb = "paused"
	}
	_, err = fmt.Fprintf(o.streams.Out, "%s rollout %s\n", name, verb)
	return err
}

// undo writes each template's last good revision back into the spec with a
// JSON patch guarded by the grid's generation: a concurrent spec edit fails
// it (the resourceVersion would also change with every status write).
func (o *options) undo(ctx context.Context, ri dynamic.ResourceInterface, name, only string) error {
	grid, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	templates, _, _ := unstructured.NestedSlice(grid.Object, "status", "rollout", "templates")
	ops := []map[string]any{{"op": "test", "path": "/metadata/generation", "value": grid.GetGeneration()}}
	var undone []string
	for _, item := range templates {
		t, ok := item.(map[string]any)
		if !ok {
			continue
		}
		tname, _, _ := unstructured.NestedString(t, "name")
		target, _, _ := unstructured.NestedString(t, "target")
		lastGood, _, _ := unstructured.NestedString(t, "lastGood")
		spec, ok, _ := unstructured.NestedFieldNoCopy(t, "lastGoodTemplate")
		if !ok || lastGood == "" || lastGood == target || (only != "" && only != tname) {
			continue
		}
		path := "/spec/template"
		if tname != superedgev1.DefaultTemplateName {
			path = "/spec/templatePool/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(tname)
		}
		ops = append(ops, map[string]any{"op": "replace", "path": path, "value": spec})
		undone = append(undone, fmt.Sprintf("%s (%s -> %s)", tname, target, lastGood))
	}
	if len(undone) == 0 {
		return fmt.Errorf("%s: no template differs from its last good revision (status.rollout.templates)", name)
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if _, err := ri.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.streams.Out, "%s rolled back: %s\n", name, strings.Join(undone, ", "))
	return err
}

// RolloutReport is a grid's rollout as `rollout status` prints it.
type RolloutReport struct {
	Grid    string   `json:"grid"`
	Phase   string   `json:"phase"`
	Wave    string   `json:"wave"`
	Message string   `json:"message,omitempty"`
	Units   []string `json:"units"` // "nodeunit wave phase revision"
}

func (o *options) rolloutStatus(ctx context.Context, ri dynamic.ResourceInterface, name string, watch bool, timeout time.Duration) error {
	var last string
	var report RolloutReport
	check := func(ctx context.Context) (bool, error) {
		grid, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		report = rolloutReport(grid)
		line := fmt.Sprintf("%s: %s, wave %s", name, report.Phase, report.Wave)
		if report.Message != "" {
			line += ": " + report.Message
		}
		if watch && line != last && o.output == "" {
			fmt.Fprintln(o.streams.Out, line)
		}
		last = line
		switch report.Phase {
		case string(superedgev1.PhaseComplete), string(superedgev1.PhaseHalted):
			return true, nil
		}
		return !watch, nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, check); err != nil {
		return fmt.Errorf("%s: %w (last: %s)", name, err, last)
	}
	if err := o.print(report, func(t *table) {
		if !watch {
			t.line("%s", last)
		}
		t.row("NODEUNIT", "WAVE", "PHASE", "REVISION")
		for _, u := range report.Units {
			f := strings.Fields(u)
			t.row(f[0], f[1], f[2], f[3])
		}
	}); err != nil {
		return err
	}
	if report.Phase == string(superedgev1.PhaseHalted) {
		return fmt.Errorf("rollout of %s halted: %s", name, report.Message)
	}
	return nil
}

func rolloutReport(grid *unstructured.Unstructured) RolloutReport {
	r := RolloutReport{Grid: grid.GetNamespace() + "/" + grid.GetName(), Phase: "-", Wave: "-", Units: []string{}}
	if _, ok, _ := unstructured.NestedMap(grid.Object, "spec", "rollout"); !ok {
		r.Message = "no spec.rollout: every nodeunit is updated at once"
	}
	observed, _, _ := unstructured.NestedInt64(grid.Object, "status", "observedGeneration")
	if observed < grid.GetGeneration() {
		r.Message = fmt.Sprintf("waiting for the controller to observe generation %d", grid.GetGeneration())
		r.Phase = string(superedgev1.PhaseProgressing)
		return r
	}
	if p, ok, _ := unstructured.NestedString(grid.Object, "status", "rollout", "phase"); ok {
		r.Phase = p
	}
	if w, ok, _ := unstructured.NestedString(grid.Object, "status", "rollout", "wave"); ok {
		r.Wave = w
	}
	if msg, ok, _ := unstructured.NestedString(grid.Object, "status", "rollout", "halted", "message"); ok {
		r.Message = msg
	}
	for _, u := range explain.RolloutUnits(grid) {
		r.Units = append(r.Units, strings.Join([]string{u.NodeUnit, orDash(u.Wave), orDash(u.Phase), orDash(u.Revision)}, " "))
	}
	return r
}
