package flagcheck

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestBindAddress(t *testing.T) {
	for _, tc := range []struct {
		addr, want string
	}{
		{"", ""},
		{"0", ""},
		{":8080", ""},
		{"127.0.0.1:0", ""},
		{"[::1]:65535", ""},
		{"localhost:8080", ""},
		{"8080", `--a: Invalid value: "8080": must be host:port, or "0" to turn it off`},
		{"127.0.0.1", `--a: Invalid value: "127.0.0.1": must be host:port, or "0" to turn it off`},
		{":http", `--a: Invalid value: ":http": port must be a number from 0 to 65535`},
		{":65536", `--a: Invalid value: ":65536": port must be a number from 0 to 65535`},
		{":-1", `--a: Invalid value: ":-1": port must be a number from 0 to 65535`},
	} {
		got := ""
		if err := BindAddress(field.NewPath("--a"), tc.addr); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("BindAddress(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
