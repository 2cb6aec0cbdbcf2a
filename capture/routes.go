package capture

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/protocol"
)

type routeExec struct {
	name     string // as asked for ("" for --route-exec)
	alias    string // the name it goes by in this checkpoint ("": its own)
	path     string
	external bool
	kernel   *kernelSpec // a --kernel's file (route kernel-KIND), else nil
}

// splitAlias cuts "ALIAS=ROUTE" (or "ALIAS=PATH") into its alias and the
// rest; without "=" the alias is "".
func splitAlias(flag, s string) (alias, rest string, err error) {
	a, r, ok := strings.Cut(s, "=")
	if !ok {
		return "", s, nil
	}
	if !protocol.ValidName(a) || r == "" {
		return "", "", fmt.Errorf("%s %q: want NAME=%s with NAME of letters, digits, '.', '_' and '-' (at most 128)", flag, s, map[string]string{"--routes": "ROUTE", "--route-exec": "PATH"}[flag])
	}
	return a, r, nil
}

// RoutesDir finds the built-in routes: $TILEPIPE_ROUTES, else the routes
// folder beside the tilepipe binary (bin/routes after make build).
func RoutesDir() string {
	if d := os.Getenv("TILEPIPE_ROUTES"); d != "" {
		return d
	}
	exe, err := os.Executable()
	if err != nil {
		return "routes"
	}
	return filepath.Join(filepath.Dir(exe), "routes")
}

func resolveRoutes(cfg Config) ([]routeExec, error) {
	dir := cfg.RoutesDir
	if dir == "" {
		dir = RoutesDir()
	}
	var out []routeExec
	for _, r := range cfg.Routes {
		alias, n, err := splitAlias("--routes", r)
		if err != nil {
			return nil, err
		}
		if n == "" || filepath.Base(n) != n {
			return nil, fmt.Errorf("route %q: want a built-in route name (see tilepipe routes) or --route-exec PATH", n)
		}
		if strings.HasPrefix(n, kernelPrefix) {
			return nil, fmt.Errorf("route %q: builds a user's kernel file: give it as --kernel NAME=%s:FILE (docs/kernels.md)", n, strings.TrimPrefix(n, kernelPrefix))
		}
		out = append(out, routeExec{name: n, alias: alias, path: filepath.Join(dir, n, "route")})
	}
	for _, r := range cfg.RouteExec {
		alias, p, err := splitAlias("--route-exec", r)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		out = append(out, routeExec{path: abs, alias: alias, external: true})
	}
	kernels, err := kernelRoutes(dir, cfg.Kernels)
	if err != nil {
		return nil, err
	}
	out = append(out, kernels...)
	if len(out) == 0 {
		return nil, fmt.Errorf("routes: want at least one route")
	}
	return out, nil
}

// Describe asks the route program at path to describe itself, within
// a minute (capture's own describe call takes Config.BuildTimeout).
func Describe(ctx context.Context, path string) (protocol.Description, error) {
	return describeTemp(ctx, path, nil)
}

// describeTemp is describeRaw with env into a store of its own, discarded.
func describeTemp(ctx context.Context, path string, env map[string]string) (protocol.Description, error) {
	s, err := artifacts.Create(filepath.Join(os.TempDir(), fmt.Sprintf("tilepipe-describe-%d-%d", os.Getpid(), time.Now().UnixNano())))
	if err != nil {
		return protocol.Description{}, err
	}
	defer s.Discard()
	_, d, err := describeRaw(ctx, s, path, env, time.Minute)
	return d, err
}

func describeRaw(ctx context.Context, s *artifacts.Store, path string, env map[string]string, timeout time.Duration) (artifacts.Command, protocol.Description, error) {
	var d protocol.Description
	if _, err := os.Stat(path); err != nil {
		return artifacts.Command{}, d, fmt.Errorf("route program %s: %w (run make build for the built-in routes)", path, err)
	}
	cmd, out, reason, err := s.Run(ctx, []string{path, "describe"}, "", env, timeout)
	if err != nil {
		return cmd, d, fmt.Errorf("route %s: describe: %w", path, err)
	}
	if reason != "" {
		return cmd, d, fmt.Errorf("route %s: describe: %s", path, reason)
	}
	if d, err = protocol.ParseDescription(out); err != nil {
		return cmd, d, fmt.Errorf("route %s: describe: %w", path, err)
	}
	return cmd, d, nil
}

func describe(ctx context.Context, s *artifacts.Store, r routeExec, env map[string]string, timeout time.Duration) (artifacts.Route, artifacts.Command, error) {
	var kernel *artifacts.KernelFile
	if r.kernel != nil {
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env[KernelEnv], kernel = r.kernel.copy, r.kernel.file
	}
	cmd, d, err := describeRaw(ctx, s, r.path, env, timeout)
	if err != nil && r.kernel != nil {
		return artifacts.Route{}, cmd, fmt.Errorf("--kernel %s (%s): %w", r.alias, r.kernel.src, err)
	}
	if err != nil {
		return artifacts.Route{}, cmd, err
	}
	if !r.external && d.Name != r.name {
		return artifacts.Route{}, cmd, fmt.Errorf("route %s: describe: name %q, want %q", r.path, d.Name, r.name)
	}
	pd, err := s.PutFile(r.path, artifacts.MediaExec)
	if err != nil {
		return artifacts.Route{}, cmd, fmt.Errorf("route %s: store program: %w", r.path, err)
	}
	name, describes := d.Name, ""
	if r.alias != "" {
		name, describes = r.alias, d.Name
	}
	s.Name("routes/"+name+"/route", pd)
	s.Name("routes/"+name+"/describe.json", ocispecDesc(cmd.Stdout))
	return artifacts.Route{Name: name, Describes: describes, Kind: d.Kind, Version: d.Version, Available: d.Available, Reason: d.Reason,
		Ops: d.Ops, Exec: r.path, Digest: pd.Digest, Describe: cmd.Stdout, External: r.external,
		Validates: d.Validates, AcceptsIR: d.AcceptsIR, Devices: d.Devices, BuildCache: d.BuildCache, Kernel: kernel}, cmd, nil
}

func ocispecDesc(d artifacts.Digest) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: artifacts.MediaText, Digest: d}
}
