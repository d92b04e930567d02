package realnode

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// followPods records, while a step runs, the life of the pods a selector
// matches (each change of phase, readiness, container start or end, deletion,
// with the time it was seen) and the log of each one's containers, followed
// from its start: the log of a pod the step deletes is gone with it
// afterwards. It is kept for a failed step's report.
func followPods(ctx context.Context, client kubernetes.Interface, namespace, selector string) (*trail, error) {
	ctx, cancel := context.WithCancel(ctx)
	tr := &trail{cancel: cancel}
	pods := client.CoreV1().Pods(namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		return nil, err
	}
	followed := map[string]bool{} // pod/container
	seen := func(what string, p *corev1.Pod) {
		tr.add(fmt.Sprintf("%s %s on %s: %s", what, p.Name, p.Spec.NodeName, podState(p)))
		for _, st := range p.Status.ContainerStatuses {
			key := p.Name + "/" + st.Name
			if st.State.Running == nil && st.State.Terminated == nil || followed[key] {
				continue
			}
			followed[key] = true
			tr.wg.Go(func() { tr.follow(ctx, client, namespace, p.Name, st.Name) })
		}
	}
	for i := range list.Items {
		seen("listed", &list.Items[i])
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		tr.wg.Wait()
		return nil, err
	}
	tr.wg.Go(func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					tr.add("pod watch closed")
					return
				}
				if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type != watch.Bookmark {
					seen(strings.ToLower(string(ev.Type)), p)
				}
			}
		}
	})
	return tr, nil
}

// podState: phase, Ready, deletion, and each container's start or end.
func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			s += " ready=" + string(c.Status)
		}
	}
	if p.DeletionTimestamp != nil {
		s += " deleted=" + p.DeletionTimestamp.UTC().Format(time.TimeOnly)
	}
	for _, st := range p.Status.ContainerStatuses {
		switch {
		case st.State.Running != nil:
			s += fmt.Sprintf(" %s started=%s", st.Name, st.State.Running.StartedAt.UTC().Format(time.TimeOnly))
		case st.State.Terminated != nil:
			s += fmt.Sprintf(" %s finished=%s (%s)", st.Name, st.State.Terminated.FinishedAt.UTC().Format(time.TimeOnly), st.State.Terminated.Reason)
		}
	}
	return s
}

// follow appends one container's log, each line with the kubelet's time.
func (tr *trail) follow(ctx context.Context, client kubernetes.Interface, namespace, pod, container string) {
	rc, err := client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true, Timestamps: true}).Stream(ctx)
	if err != nil {
		tr.add(fmt.Sprintf("log of %s/%s: %v", pod, container, err))
		return
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		tr.add(fmt.Sprintf("%s/%s| %s", pod, container, sc.Text()))
	}
	if ctx.Err() == nil {
		tr.add(fmt.Sprintf("log of %s/%s ended (%v)", pod, container, sc.Err()))
	}
}
