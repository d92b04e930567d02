package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// getLoopback GETs a loopback URL (the probe address's /readyz) and copies
// the answer to out: the image has no shell or curl, so `kubectl exec` runs
// the wrapper itself for this (`kubectl grid doctor` does). Not 200 is an
// error after the answer is written.
func getLoopback(ctx context.Context, raw string, out io.Writer) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || !isLoopback(u.Host) {
		return fmt.Errorf("--get-loopback %q: want http://LOOPBACK:PORT/PATH", raw)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(out, io.LimitReader(resp.Body, 64<<10)); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return nil
}
