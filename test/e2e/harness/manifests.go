package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// The shipped manifests the node components are started from: a node
// starts with exactly the manifests' configuration.
const (
	WrapperDaemonSet  = "build/manifests/wrapper/daemonset.yaml"
	CoreDNSDaemonSet  = "build/manifests/coredns-node/daemonset.yaml"
	UpstreamEnvFile   = "build/manifests/upstream/upstream.env"
	UpstreamConfigMap = "servicegroup-upstream"
)

// edgeRBAC are the manifests whose ServiceAccounts and roles the node
// components run with.
var edgeRBAC = []string{"build/manifests/wrapper/rbac.yaml", "build/manifests/coredns-node/rbac.yaml"}

// shippedContainer is the single container of a shipped DaemonSet as a
// kubelet would start it on one node.
type shippedContainer struct {
	// ServiceAccount is the pod's spec.serviceAccountName.
	ServiceAccount, Namespace string
	// Args are command (empty: the image's entrypoint) and args, $(VAR) expanded.
	Command, Args []string
	// Env is envFrom (only the upstream ConfigMap is known) and env (values
	// and spec.nodeName), in the kubelet's order: env overrides envFrom.
	Env []string
	// Mounts are the container's volume mounts by volume name.
	Mounts map[string]string
	// HostPaths are the hostPath volumes (node state that survives a
	// restart, or files another component of the node writes), by volume
	// name.
	HostPaths map[string]hostPathMount
	// Name is the container's name, Image its image; Init are the pod's
	// init containers, run to completion in order before it.
	Name, Image string
	Init        []*shippedContainer
}

// hostPathMount is one hostPath volume mounted into a container.
type hostPathMount struct {
	// Mount is where the container sees it, Path the file or directory on
	// the node.
	Mount, Path string
	// MustExist is a volume of type File: the kubelet starts the pod only
	// once the file is there, and creates nothing.
	MustExist bool
}

// readShippedDaemonSet reads one DaemonSet from a manifest file (the file
// may hold other objects too).
func readShippedDaemonSet(rel string) (*appsv1.DaemonSet, error) {
	objs, err := readManifestObjects(rel)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.kind == "DaemonSet" {
			var ds appsv1.DaemonSet
			if err := sigsyaml.UnmarshalStrict(o.data, &ds); err != nil {
				return nil, fmt.Errorf("%s: %w", rel, err)
			}
			return &ds, nil
		}
	}
	return nil, fmt.Errorf("%s: no DaemonSet", rel)
}

// manifestObject is one YAML document of a manifest file.
type manifestObject struct {
	kind string
	data []byte
}

func readManifestObjects(rel string) ([]manifestObject, error) {
	data, err := testbin.ReadRepoFile(rel)
	if err != nil {
		return nil, err
	}
	var out []manifestObject
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		if raw == nil {
			continue
		}
		doc, err := sigsyaml.Marshal(raw)
		if err != nil {
			return nil, err
		}
		kind, _ := raw["kind"].(string)
		out = append(out, manifestObject{kind: kind, data: doc})
	}
}

// readUpstreamEnv reads the upstream ConfigMap's data from its env file
// (kustomize's configMapGenerator `envs:` format: KEY=VALUE, # comments).
func readUpstreamEnv() (map[string]string, error) {
	data, err := testbin.ReadRepoFile(UpstreamEnvFile)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		k, v, ok := strings.Cut(text, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s:%d: want KEY=VALUE, got %q", UpstreamEnvFile, line, text)
		}
		out[k] = v
	}
	return out, sc.Err()
}

// containerFor resolves the DaemonSet's only container for node: envFrom of
// the upstream ConfigMap gets upstream (the caller's values), env gets its
// values and spec.nodeName; anything else the harness cannot play is an
// error rather than silently dropped.
func containerFor(ds *appsv1.DaemonSet, node string, upstream map[string]string) (*shippedContainer, error) {
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		return nil, fmt.Errorf("DaemonSet %s: want exactly one container, got %d", ds.Name, len(spec.Containers))
	}
	out, err := resolveContainer(ds, spec.Containers[0], node, upstream)
	if err != nil {
		return nil, err
	}
	for _, ic := range spec.InitContainers {
		init, err := resolveContainer(ds, ic, node, upstream)
		if err != nil {
			return nil, err
		}
		out.Init = append(out.Init, init)
	}
	return out, nil
}

// resolveContainer resolves one container of the DaemonSet's pod.
func resolveContainer(ds *appsv1.DaemonSet, c corev1.Container, node string, upstream map[string]string) (*shippedContainer, error) {
	spec := ds.Spec.Template.Spec
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil || from.ConfigMapRef.Name != UpstreamConfigMap {
			return nil, fmt.Errorf("DaemonSet %s: envFrom %+v: only ConfigMap %s is known to the harness", ds.Name, from, UpstreamConfigMap)
		}
		for k, v := range upstream {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			set(e.Name, expandVars(e.Value, env))
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			set(e.Name, node)
		default:
			return nil, fmt.Errorf("DaemonSet %s: env %s: only values and spec.nodeName are known to the harness", ds.Name, e.Name)
		}
	}
	out := &shippedContainer{Name: c.Name, Image: c.Image, ServiceAccount: spec.ServiceAccountName, Namespace: ds.Namespace, Mounts: map[string]string{}, HostPaths: map[string]hostPathMount{}}
	if out.Namespace == "" {
		out.Namespace = "default"
	}
	if out.ServiceAccount == "" {
		out.ServiceAccount = "default"
	}
	for _, a := range c.Command {
		out.Command = append(out.Command, expandVars(a, env))
	}
	for _, a := range c.Args {
		out.Args = append(out.Args, expandVars(a, env))
	}
	for _, k := range order {
		out.Env = append(out.Env, k+"="+env[k])
	}
	hostPath := map[string]*corev1.HostPathVolumeSource{}
	for _, v := range spec.Volumes {
		hostPath[v.Name] = v.HostPath
	}
	for _, m := range c.VolumeMounts {
		out.Mounts[m.Name] = m.MountPath
		if hp := hostPath[m.Name]; hp != nil {
			if m.SubPath != "" || m.SubPathExpr != "" {
				return nil, fmt.Errorf("DaemonSet %s: volume mount %s: subPath is not known to the harness", ds.Name, m.Name)
			}
			out.HostPaths[m.Name] = hostPathMount{Mount: m.MountPath, Path: filepath.Clean(hp.Path),
				MustExist: hp.Type != nil && *hp.Type == corev1.HostPathFile}
		}
	}
	return out, nil
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandVars expands $(NAME) from env as the kubelet does; unknown
// references stay as written (the kubelet's rule too).
func expandVars(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := env[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

// mountedFile maps a path inside a container's configMap volume mount (e.g.
// /etc/coredns/Corefile) to the file the harness wrote instead.
func (sc *shippedContainer) mountedFile(volume, inside, replacement string, args []string) ([]string, error) {
	mount, ok := sc.Mounts[volume]
	if !ok {
		return nil, fmt.Errorf("no volume mount %q", volume)
	}
	want := filepath.Join(mount, inside)
	out := make([]string, len(args))
	found := false
	for i, a := range args {
		if a == want {
			a, found = replacement, true
		}
		out[i] = a
	}
	if !found {
		return nil, fmt.Errorf("no argument %s in %v", want, args)
	}
	return out, nil
}

// withHostPaths rewrites arguments under a hostPath volume's mount path to
// its path on the node under nodeRoot (the node's own file system for
// hostPaths, kept across restarts of the process as the node keeps them, and
// shared by every component of the node as a real node shares its files). A
// directory is created as the kubelet's DirectoryOrCreate does; a File volume
// must already be there (another component of the node writes it).
func (sc *shippedContainer) withHostPaths(nodeRoot string, args []string) ([]string, error) {
	out := slices.Clone(args)
	for volume, hp := range sc.HostPaths {
		local := filepath.Join(nodeRoot, hp.Path)
		if hp.MustExist {
			if fi, err := os.Stat(local); err != nil || !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("hostPath volume %s: %s (type File) is not a file on the node (yet): %v", volume, hp.Path, err)
			}
		} else if err := os.MkdirAll(local, 0o755); err != nil {
			return nil, err
		}
		for i, a := range out {
			out[i] = replacePath(a, hp.Mount, local)
		}
	}
	return out, nil
}

// SnapshotsMissing says why a node could not restart without the apiserver
// with the shipped configuration ("" when it can): the wrapper's DaemonSet
// must give it a state directory on a hostPath, and the node Corefile's
// gridhosts block a snapshot file.
func SnapshotsMissing() string {
	var missing []string
	ds, err := readShippedDaemonSet(WrapperDaemonSet)
	if err != nil {
		return err.Error()
	}
	sc, err := containerFor(ds, "node", map[string]string{})
	if err != nil {
		return err.Error()
	}
	if !slices.ContainsFunc(sc.Args, func(a string) bool {
		for _, hp := range sc.HostPaths {
			if strings.Contains(a, hp.Mount) {
				return true
			}
		}
		return false
	}) {
		missing = append(missing, WrapperDaemonSet+" passes the wrapper no hostPath state directory")
	}
	corefile, err := readShippedCorefile(CorefileNode)
	if err != nil {
		return err.Error()
	}
	if !slices.ContainsFunc(strings.Split(corefile, "\n"), func(l string) bool {
		f := strings.Fields(l)
		return len(f) > 0 && f[0] == "snapshot"
	}) {
		missing = append(missing, "corefile/"+CorefileNode+" has no gridhosts snapshot")
	}
	return strings.Join(missing, "; ")
}

// replacePath replaces every occurrence of the path mount in s that is the
// whole path or a parent of it (followed by the end, '/', or a non-path
// character such as a space or quote) and starts a path (at the start of s
// or after a non-path character: not inside a path another mount was
// already mapped to) with local.
func replacePath(s, mount, local string) string {
	var b strings.Builder
	for i := 0; ; {
		j := strings.Index(s[i:], mount)
		if j < 0 {
			b.WriteString(s[i:])
			return b.String()
		}
		start, end := i+j, i+j+len(mount)
		if (start == 0 || !isPathChar(s[start-1])) && (end == len(s) || !isPathChar(s[end]) || s[end] == '/') {
			b.WriteString(s[i:start] + local)
		} else {
			b.WriteString(s[i:end])
		}
		i = end
	}
}

func isPathChar(c byte) bool {
	return c == '/' || c == '.' || c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
