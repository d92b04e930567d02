package imagebuild

import (
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultPlatforms are the platforms of edge fleets.
var DefaultPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
	{OS: "linux", Architecture: "arm", Variant: "v7"},
}

// ParsePlatforms parses "linux/amd64,linux/arm/v7".
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, item := range strings.Split(s, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		if _, err := goEnv(*p); err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

// goEnv is the cross-compilation environment for a platform.
func goEnv(p v1.Platform) ([]string, error) {
	if p.OS != "linux" {
		return nil, fmt.Errorf("platform %s: only linux images are built", p.String())
	}
	env := []string{"GOOS=linux", "GOARCH=" + p.Architecture}
	switch {
	case p.Architecture == "arm":
		switch p.Variant {
		case "v6", "v7":
			env = append(env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
		default:
			return nil, fmt.Errorf("platform %s: arm needs variant v6 or v7", p.String())
		}
	case p.Variant != "":
		if p.Architecture != "arm64" || p.Variant != "v8" {
			return nil, fmt.Errorf("platform %s: unsupported variant", p.String())
		}
	}
	return env, nil
}
