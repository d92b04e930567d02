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
	"strings"
	"sync"

	"github.com/servicegroup/servicegroup/build/crds"
)

// A control plane with CRDs starts with them already stored: the first
// start on a machine applies them through the API, as `make install`
// would, and keeps what kube-apiserver wrote to etcd for them (the seed);
// later starts put those values into the new etcd before kube-apiserver
// starts, so it finds them as it would after any restart. Applying them cost
// about as much CPU as starting kube-apiserver (validating and storing two
// CRDs of some 470 KB each): half of a control plane start, a hundred times
// a run. A seed is keyed by everything that decides its bytes: the
// kube-apiserver binary and the manifests.

// crdPrefix is where kube-apiserver (default --etcd-prefix) keeps CRDs.
const crdPrefix = "/registry/apiextensions.k8s.io/customresourcedefinitions/"

// seedKV is one etcd key and value, as etcd's JSON gateway spells them.
type seedKV struct {
	Key   string `json:"key"`   // base64
	Value string `json:"value"` // base64
}

var seedKeys sync.Map // apiserver binary path -> seed file path

// crdSeedPath is the seed file for the apiserver binary bin and the embedded
// manifests, under the build cache.
func crdSeedPath(bin string) (string, error) {
	if p, ok := seedKeys.Load(bin); ok {
		return p.(string), nil
	}
	st, err := os.Stat(bin)
	if err != nil {
		return "", err
	}
	ms, err := crds.Manifests()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00", bin, st.Size(), st.ModTime().UnixNano())
	for _, m := range ms {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Name, m.JSON)
	}
	p := filepath.Join(CacheRoot(), "crd-seeds", hex.EncodeToString(h.Sum(nil))[:24]+".json")
	seedKeys.Store(bin, p)
	return p, nil
}

var readSeeds sync.Map // seed file path -> its checked []seedKV

// readCRDSeed returns the seed at path, nil if there is none yet. A seed that
// does not hold one stored CRD per manifest is an error: a start must not go
// on without some of its CRDs. A seed read and checked once is kept for the
// process's later starts (a package's tests start dozens).
func readCRDSeed(path string) ([]seedKV, error) {
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
		return nil, fmt.Errorf("CRD seed %s: %w (remove it to make it again)", path, err)
	}
	if err := checkCRDSeed(kvs); err != nil {
		return nil, fmt.Errorf("CRD seed %s: %w (remove it to make it again)", path, err)
	}
	readSeeds.Store(path, kvs)
	return kvs, nil
}

// checkCRDSeed says whether kvs holds exactly the embedded CRDs, each stored
// as kube-apiserver stores them.
func checkCRDSeed(kvs []seedKV) error {
	ms, err := crds.Manifests()
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, m := range ms {
		want[crdPrefix+m.Name] = true
	}
	for _, kv := range kvs {
		key, err := base64.StdEncoding.DecodeString(kv.Key)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		value, err := base64.StdEncoding.DecodeString(kv.Value)
		if err != nil {
			return fmt.Errorf("value of %s: %w", key, err)
		}
		if !want[string(key)] {
			return fmt.Errorf("holds %s, not one of the embedded CRDs", key)
		}
		if !storedCRD(value) {
			return fmt.Errorf("%s is not a CustomResourceDefinition as kube-apiserver stores one", key)
		}
		delete(want, string(key))
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for k := range want {
			missing = append(missing, strings.TrimPrefix(k, crdPrefix))
		}
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

// putCRDSeed writes the seed's values into etcd.
func (cp *ControlPlane) putCRDSeed(ctx context.Context, kvs []seedKV) error {
	for _, kv := range kvs {
		if err := cp.etcdCall(ctx, "/v3/kv/put", map[string]any{"key": kv.Key, "value": kv.Value}, nil); err != nil {
			return fmt.Errorf("seed the CRDs: %w", err)
		}
	}
	return nil
}

// saveCRDSeed reads what kube-apiserver stored for the CRDs and keeps it at
// path (renamed into place: starts running side by side may race to write
// the same seed, each whole).
func (cp *ControlPlane) saveCRDSeed(ctx context.Context, path string) error {
	var resp struct {
		KVs []seedKV `json:"kvs"`
	}
	prefix := []byte(crdPrefix)
	end := append([]byte(nil), prefix...)
	end[len(end)-1]++
	req := map[string]any{
		"key":       base64.StdEncoding.EncodeToString(prefix),
		"range_end": base64.StdEncoding.EncodeToString(end),
	}
	if err := cp.etcdCall(ctx, "/v3/kv/range", req, &resp); err != nil {
		return err
	}
	if err := checkCRDSeed(resp.KVs); err != nil {
		return fmt.Errorf("what etcd holds %w", err)
	}
	data, err := json.Marshal(resp.KVs)
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
