package controller

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

func decode(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestContains(t *testing.T) {
	for _, c := range []struct {
		have, want string
		ok         bool
	}{
		{`{"a":1,"b":2}`, `{"a":1}`, true},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":1}`, `{"b":1}`, false},
		// A default filled in inside an atomic struct does not count as drift.
		{`{"fieldRef":{"apiVersion":"v1","fieldPath":"spec.nodeName"}}`, `{"fieldRef":{"fieldPath":"spec.nodeName"}}`, true},
		{`{"l":[{"n":"a"},{"n":"b"}]}`, `{"l":[{"n":"a"}]}`, false},
		{`{"l":[{"n":"a","x":1}]}`, `{"l":[{"n":"a"}]}`, true},
		{`{"cpu":"1"}`, `{"cpu":"1000m"}`, true},
		{`{"cpu":"2"}`, `{"cpu":"1000m"}`, false},
		{`{}`, `{"strategy":{}}`, true},
		{`{"a":null}`, `{"a":{"b":1}}`, false},
		{`{"a":true}`, `{"a":false}`, false},
	} {
		if got := contains(decode(t, c.have), decode(t, c.want)); got != c.ok {
			t.Errorf("contains(%s, %s) = %v, want %v", c.have, c.want, got, c.ok)
		}
	}
}

func FuzzContains(f *testing.F) {
	f.Add(`{"a":[1,{"b":"1000m"}]}`, `{"a":[1,{"b":"1"}]}`)
	f.Add(`{}`, `null`)
	f.Fuzz(func(t *testing.T, have, want string) {
		var h, w any
		if json.Unmarshal([]byte(have), &h) != nil || json.Unmarshal([]byte(want), &w) != nil {
			return
		}
		_ = contains(h, w)
		if !contains(h, h) {
			t.Fatalf("%s does not contain itself", have)
		}
	})
}

func TestDesiredDeployment(t *testing.T) {
	g := &superedgev1.DeploymentGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", Labels: map[string]string{"team": "edge"}},
		Spec: superedgev1.DeploymentGridSpec{GridUniqKey: "zone", Template: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"zone": "wrong", "os": "linux"},
					Containers:   []corev1.Container{{Name: "c", Image: "i"}},
				},
			},
		}},
	}
	before := g.DeepCopy()
	d, err := deploymentGrids{}.desired(g, unit{value: "east", name: "web-east", template: superedgev1.DefaultTemplateName})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Name != "web-east" || *d.Namespace != "ns" {
		t.Errorf("name %s/%s", *d.Namespace, *d.Name)
	}
	if d.Spec.Replicas != nil {
		t.Errorf("replicas omitted must stay omitted (the apiserver defaults it): %v", *d.Spec.Replicas)
	}
	if ns := d.Spec.Template.Spec.NodeSelector; ns["zone"] != "east" || ns["os"] != "linux" {
		t.Errorf("nodeSelector %v", ns)
	}
	if l := d.Spec.Template.Labels; len(l) != 1 || l["app"] != "web" {
		t.Errorf("pod labels must be the template's only (as SuperEdge builds them): %v", l)
	}
	if a := d.Spec.Template.Annotations; len(a) != 0 {
		t.Errorf("pod annotations must be the template's: %v", a)
	}
	if a := d.Annotations; a[superedgev1.AnnotationGridUniqKey] != "zone" {
		t.Errorf("annotations %v", a)
	}
	if l := d.Labels; l["team"] != "edge" || l[superedgev1.LabelGridUniqKey] != "zone" {
		t.Errorf("labels %v", l)
	}
	if len(d.OwnerReferences) != 1 || *d.OwnerReferences[0].UID != "u1" || !*d.OwnerReferences[0].Controller {
		t.Errorf("owner %+v", d.OwnerReferences)
	}
	if d.Annotations[AnnotationAppliedHash] == "" {
		t.Error("no hash")
	}
	if d.Spec.Template.CreationTimestamp != nil {
		t.Error("creationTimestamp claimed")
	}
	if !equalJSON(t, before, g) {
		t.Error("the grid was modified")
	}
	// Same input, same hash; another nodeunit, another hash.
	d2, _ := deploymentGrids{}.desired(g, unit{value: "east", name: "web-east"})
	d3, _ := deploymentGrids{}.desired(g, unit{value: "west", name: "web-west"})
	if d2.Annotations[AnnotationAppliedHash] != d.Annotations[AnnotationAppliedHash] || d3.Annotations[AnnotationAppliedHash] == d.Annotations[AnnotationAppliedHash] {
		t.Error("hash not a function of the wanted child")
	}
}

func TestDesiredService(t *testing.T) {
	g := &superedgev1.ServiceGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api", Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: "{}", "owner": "ops"}},
		Spec: superedgev1.ServiceGridSpec{GridUniqKey: "zone1", Template: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Port: 80}, {Port: 81, TargetPort: intstr.FromString("http")}},
		}},
	}
	s, err := serviceGrids{}.desired(g, unit{name: "api-svc"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Annotations[superedgev1.AnnotationTopologyKeys] != `["zone1"]` || s.Annotations["owner"] != "ops" {
		t.Errorf("annotations %v", s.Annotations)
	}
	if _, ok := s.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Error("kubectl's last-applied annotation copied")
	}
	if s.Spec.Ports[0].TargetPort != nil || s.Spec.Ports[1].TargetPort.StrVal != "http" {
		t.Errorf("targetPorts %v %v", s.Spec.Ports[0].TargetPort, s.Spec.Ports[1].TargetPort)
	}
	if s.Spec.ClusterIP != nil || s.Spec.Ports[0].NodePort != nil {
		t.Error("allocations claimed")
	}
}

func TestChangedLabelKeys(t *testing.T) {
	got := changedLabelKeys(map[string]string{"a": "1", "b": "2", "c": "3"}, map[string]string{"a": "1", "b": "x", "d": "4"})
	slices.Sort(got)
	if !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Errorf("got %v", got)
	}
	if got := changedLabelKeys(map[string]string{"a": "1"}, map[string]string{"a": "1"}); len(got) != 0 {
		t.Errorf("equal labels changed %v", got)
	}
}

func TestTransform(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady}}}}
	out, _ := Transform(node)
	if n := out.(*corev1.Node); len(n.Status.Conditions) != 0 || n.Labels["zone"] != "a" {
		t.Errorf("node not stripped to labels: %+v", n)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl"}, {Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply}}}}
	out, _ = Transform(d)
	if mf := out.(*appsv1.Deployment).ManagedFields; len(mf) != 1 || mf[0].Manager != FieldManager {
		t.Errorf("managedFields %v", mf)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestDesiredStatefulSetDropsClaimStatus(t *testing.T) {
	g := &superedgev1.StatefulSetGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec: superedgev1.StatefulSetGridSpec{GridUniqKey: "zone", Template: appsv1.StatefulSetSpec{
			ServiceName: "db-svc",
			Template:    corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec:       corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
			}},
		}},
	}
	s, err := statefulSetGrids{}.desired(g, unit{value: "u1", name: "db-u1"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(s)
	if strings.Contains(string(data), `"status"`) || strings.Contains(string(data), "creationTimestamp") {
		t.Errorf("claims fields it must not: %s", data)
	}
	if *s.Spec.ServiceName != "db-svc" || s.Spec.Template.Spec.NodeSelector["zone"] != "u1" {
		t.Errorf("spec %s", data)
	}
}
