package prepare

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestValidate: every bound of Config.Validate, at both ends.
func TestValidate(t *testing.T) {
	base := DefaultConfig
	base.Jobs = 2
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"defaults", func(c *Config) {}, ""},
		{"build timeout 0", func(c *Config) { c.BuildTimeout = 0 }, "--build-timeout-s: want 1 to 86400, got 0"},
		{"build timeout 0.999 s", func(c *Config) { c.BuildTimeout = 999 * time.Millisecond }, "--build-timeout-s: want 1 to 86400, got 0.999"},
		{"build timeout 1 s", func(c *Config) { c.BuildTimeout = time.Second }, ""},
		{"build timeout 86400 s", func(c *Config) { c.BuildTimeout = 86400 * time.Second }, ""},
		{"build timeout 86401 s", func(c *Config) { c.BuildTimeout = 86401 * time.Second }, "--build-timeout-s: want 1 to 86400, got 86401"},
		{"jobs 0", func(c *Config) { c.Jobs = 0 }, "jobs: want 1 to 64, got 0"},
		{"jobs 1", func(c *Config) { c.Jobs = 1 }, ""},
		{"jobs 64", func(c *Config) { c.Jobs = 64 }, ""},
		{"jobs 65", func(c *Config) { c.Jobs = 65 }, "jobs: want 1 to 64, got 65"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.set(&c)
			got := ""
			if err := c.Validate(); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRunValidates: Run refuses a config out of range before it opens the
// capture or creates the output directory.
func TestRunValidates(t *testing.T) {
	out := filepath.Join(t.TempDir(), "prepared")
	cfg := DefaultConfig
	cfg.Capture, cfg.Output, cfg.BuildTimeout = "no such capture", out, 0
	_, err := Run(context.Background(), cfg)
	if want := "--build-timeout-s: want 1 to 86400, got 0"; err == nil || err.Error() != want {
		t.Errorf("Run(build timeout 0) = %v, want %s", err, want)
	}
	if _, serr := os.Lstat(out); !os.IsNotExist(serr) {
		t.Errorf("Run(build timeout 0) left %s: %v", out, serr)
	}
}
