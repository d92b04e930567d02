package controlplane

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// CompactEtcd writes a key of its own to etcd, so that etcd's revision is
// past every resourceVersion the apiserver has handed out, and compacts
// etcd's history at that revision, as the apiserver's periodic compaction
// would once it has run. A watch from any earlier resourceVersion then ends
// in 410, from etcd as from a new watch cache. It returns the revision.
// Through etcd's JSON gateway: the test etcd serves plain HTTP on loopback.
func (cp *ControlPlane) CompactEtcd(ctx context.Context) (int64, error) {
	var put struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	key := base64.StdEncoding.EncodeToString([]byte("/servicegroup-test/compaction-mark"))
	value := base64.StdEncoding.EncodeToString([]byte(time.Now().UTC().Format(time.RFC3339Nano)))
	if err := cp.etcdCall(ctx, "/v3/kv/put", map[string]any{"key": key, "value": value}, &put); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(put.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd put: revision %q: %w", put.Header.Revision, err)
	}
	if err := cp.etcdCall(ctx, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

func (cp *ControlPlane) etcdCall(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, cp.etcdURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(r)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, res.Status, data)
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(data, resp); err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	return nil
}
