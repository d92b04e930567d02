package testmonitoring

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"time"
)

// scrapeClient scrapes as the shipped ServiceMonitors do: HTTPS without
// verifying the components' self-signed serving certificates.
var scrapeClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
}}

// Scrape GETs https://addr+path with bearer as the token ("" sends none)
// and returns the status code and body.
func Scrape(ctx context.Context, addr, path, bearer string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
