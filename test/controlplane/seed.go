package controlplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/servicegroup/servicegroup/build/crds"
)

// A control plane starts from what kube-apiserver wrote to etcd the first
// time it started with the same binary, flags and CRDs on this machine (the
// seed): its bootstrap (the system namespaces, the RBAC roles and bindings,
// the priority classes, the `kubernetes` Service and its ServiceCIDR, the
// APIServices) and, with CRDs, what applying them through the API stored.
// The seed's values go into the new etcd before kube-apiserver starts, so it
// finds them as after any restart and reconciles rather than creates them.
// Applying the CRDs cost about as much CPU as starting kube-apiserver
// (validating and storing two CRDs of some 470 KB each); the bootstrap's
// writes a quarter of a start more. A control plane starts some 150 times a
// run.

// Where kube-apiserver (default --etcd-prefix) keeps what the seed holds,
// and what it leaves out: what names this apiserver's instance or its
// clients' CA (the identity and peer Leases, the authentication ConfigMap,
// which it writes again at every start), what its endpoint reconciler keeps (with
// --endpoint-reconciler-type=lease), and Events.
const (
	registryPrefix = "/registry/"
	crdPrefix      = registryPrefix + "apiextensions.k8s.io/customresourcedefinitions/"
)

var (
	notSeeded = []string{
		registryPrefix + "events/",
		registryPrefix + "leases/",
		registryPrefix + "masterleases/",
		registryPrefix + "peerserverleases/",
		registryPrefix + "services/endpoints/",
		registryPrefix + "endpointslices/",
		registryPrefix + "configmaps/kube-system/extension-apiserver-authentication",
	}
	// bootstrapped are objects kube-apiserver makes after /readyz says ok:
	// a seed is taken only once they exist.
	bootstrapped = []string{
		registryPrefix + "namespaces/default",
		registryPrefix + "namespaces/kube-system",
		registryPrefix + "namespaces/kube-public",
		registryPrefix + "namespaces/kube-node-lease",
		registryPrefix + "services/specs/default/kubernetes",
		registryPrefix + "clusterroles/cluster-admin",
		registryPrefix + "clusterrolebindings/cluster-admin",
		registryPrefix + "priorityclasses/system-node-critical",
	}
)

func seeded(key string) bool {
	return strings.HasPrefix(key, registryPrefix) && !slices.ContainsFunc(notSeeded, func(p string) bool { return strings.HasPrefix(key, p) })
}

// seedFormat names the rules above: a change to what a seed keeps changes
// it, so that seeds kept by the old rules are not read by the new.
const seedFormat = "seed/2"

// seedKV is one etcd key and value, as etcd's JSON gateway spells them.
type seedKV struct {
	Key   string `json:"key"`   // base64
	Value string `json:"value"` // base64
}

// seedPath is the seed file of a control plane that runs the kube-apiserver
// bin with opts, under the build cache. It is keyed by everything that
// decides the seed's bytes: the binary, the Service CIDR, the flags (an
// audit flag's value, a path of the test's own, aside) and the CRDs'
// manifests.
func seedPath(bin string, opts Options) (string, error) {
	st, err := os.Stat(bin)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%s\x00", seedFormat, bin, st.Size(), st.ModTime().UnixNano(), opts.ServiceCIDR)
	for _, a := range opts.APIServerArgs {
		if name, _, _ := strings.Cut(a, "="); strings.HasPrefix(name, "--audit-") {
			a = name
		}
		fmt.Fprintf(h, "%s\x00", a)
	}
	if opts.CRDs {
		d, err := manifestsDigest()
		if err != nil {
			return "", err
		}
		h.Write(d)
	}
	return filepath.Join(CacheRoot(), "seeds", hex.EncodeToString(h.Sum(nil))[:24]+".json"), nil
}

// manifestsDigest hashes the embedded CRDs' names and manifests, once per
// process: every start with CRDs keys its seed by them.
var manifestsDigest = sync.OnceValues(func() ([]byte, error) {
	ms, err := crds.Manifests()
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, m := range ms {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Name, m.JSON)
	}
	return h.Sum(nil), nil
})

var readSeeds sync.Map // seed file path -> its checked []seedKV

// readSeed returns the seed at path, nil if there is none yet. A seed that
// does not hold a whole bootstrap, and one stored CRD per manifest if
// withCRDs (none otherwise), is an error: a start must not go on without
// some of its objects. A seed read and checked once is kept for the
// process's later starts (a package's tests start dozens).
func readSeed(path string, withCRDs bool) ([]seedKV, error) {
	if kvs, ok := readSeeds.Load(path); ok {
		return kvs.([]seedKV), nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var kvs []seedKV
	if err := json.Unmarshal(data, &kvs); err != nil {
		return nil, fmt.Errorf("seed %s: %w (remove it to make it again)", path, err)
	}
	if err := checkSeed(kvs, withCRDs); err != nil {
		return nil, fmt.Errorf("seed %s: %w (remove it to make it again)", path, err)
	}
	readSeeds.Store(path, kvs)
	return kvs, nil
}

// checkSeed says whether kvs is a whole seed: every key one kube-apiserver
// writes and a seed keeps, the bootstrapped objects among them, and exactly
// the embedded CRDs, each stored as kube-apiserver stores them, if withCRDs
// (no CRD otherwise).
func checkSeed(kvs []seedKV, withCRDs bool) error {
	wantCRDs := map[string]bool{}
	if withCRDs {
		ms, err := crds.Manifests()
		if err != nil {
			return err
		}
		for _, m := range ms {
			wantCRDs[crdPrefix+m.Name] = true
		}
	}
	have := map[string]bool{}
	for _, kv := range kvs {
		keyBytes, err := base64.StdEncoding.DecodeString(kv.Key)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		key := string(keyBytes)
		value, err := base64.StdEncoding.DecodeString(kv.Value)
		if err != nil {
			return fmt.Errorf("value of %s: %w", key, err)
		}
		if !seeded(key) {
			return fmt.Errorf("holds %s, which a seed leaves out", key)
		}
		if have[key] {
			return fmt.Errorf("holds %s twice", key)
		}
		have[key] = true
		if strings.HasPrefix(key, crdPrefix) {
			if !wantCRDs[key] {
				return fmt.Errorf("holds %s, not one of the embedded CRDs", key)
			}
			if !storedCRD(value) {
				return fmt.Errorf("%s is not a CustomResourceDefinition as kube-apiserver stores one", key)
			}
		}
	}
	var missing []string
	for _, k := range bootstrapped {
		if !have[k] {
			missing = append(missing, strings.TrimPrefix(k, registryPrefix))
		}
	}
	for k := range wantCRDs {
		if !have[k] {
			missing = append(missing, strings.TrimPrefix(k, registryPrefix))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("has no %s", strings.Join(missing, ", "))
	}
	return nil
}

// storedCRD says whether value is a CRD as kube-apiserver writes it to etcd:
// JSON (apiextensions' storage encoding) or protobuf ("k8s\0" first).
func storedCRD(value []byte) bool {
	if bytes.HasPrefix(value, []byte("k8s\x00")) {
		return true
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	return json.Unmarshal(value, &head) == nil && head.Kind == "CustomResourceDefinition" &&
		strings.HasPrefix(head.APIVersion, "apiextensions.k8s.io/")
}

// putSeed writes the seed's values into etcd, one put (one revision) each,
// as kube-apiserver wrote them.
func (cp *ControlPlane) putSeed(ctx context.Context, kvs []seedKV) error {
	for _, kv := range kvs {
		if err := cp.etcdCall(ctx, "/v3/kv/put", map[string]any{"key": kv.Key, "value": kv.Value}, nil); err != nil {
			return fmt.Errorf("seed etcd: %w", err)
		}
	}
	return nil
}

// saveSeed waits (within bound) until kube-apiserver has bootstrapped, then
// keeps what it stored at path (renamed into place: starts running side by
// side may race to write the same seed, each whole).
func (cp *ControlPlane) saveSeed(ctx context.Context, path string, withCRDs bool, bound time.Duration) error {
	var kvs []seedKV
	deadline := time.Now().Add(bound)
	for {
		var err error
		if kvs, err = cp.readRegistry(ctx); err != nil {
			return err
		}
		err = checkSeed(kvs, withCRDs)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("what etcd holds %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	data, err := json.Marshal(kvs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".seed-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// readRegistry returns what etcd holds under the registry that a seed keeps.
func (cp *ControlPlane) readRegistry(ctx context.Context) ([]seedKV, error) {
	var resp struct {
		KVs []seedKV `json:"kvs"`
	}
	prefix := []byte(registryPrefix)
	end := append([]byte(nil), prefix...)
	end[len(end)-1]++
	req := map[string]any{
		"key":       base64.StdEncoding.EncodeToString(prefix),
		"range_end": base64.StdEncoding.EncodeToString(end),
	}
	if err := cp.etcdCall(ctx, "/v3/kv/range", req, &resp); err != nil {
		return nil, err
	}
	var kvs []seedKV
	for _, kv := range resp.KVs {
		key, err := base64.StdEncoding.DecodeString(kv.Key)
		if err != nil {
			return nil, fmt.Errorf("etcd key: %w", err)
		}
		if seeded(string(key)) {
			kvs = append(kvs, kv)
		}
	}
	return kvs, nil
}
