package main

import (
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/worker"
)

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		StopGrace   string            `yaml:"stop_grace_period"`
		Restart     string            `yaml:"restart"`
		Build       any               `yaml:"build"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Expose      []string          `yaml:"expose"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]any    `yaml:"depends_on"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// The packages of the commands the image holds.
const (
	fencedqPkg    = "./cmd/fencedq"
	bankWorkerPkg = "./examples/bank/cmd/bank-worker"
)

// dockerImage is what the Dockerfile builds.
type dockerImage struct {
	// binaries maps each path installed in the final image to the Go
	// package built into it.
	binaries map[string]string
	// entrypoint is the image's ENTRYPOINT (exec form).
	entrypoint []string
}

// readDockerfile reads the go build commands, the COPY --from lines that
// install their outputs, and the ENTRYPOINT.
func readDockerfile(t *testing.T, df string) dockerImage {
	t.Helper()
	built := map[string]string{} // build output -> package
	img := dockerImage{binaries: map[string]string{}}
	// Continuation lines make one instruction.
	for _, line := range strings.Split(strings.ReplaceAll(df, "\\\n", " "), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "RUN":
			for _, c := range strings.Split(strings.Join(f[1:], " "), "&&") {
				w := strings.Fields(c)
				for i := 0; i+1 < len(w); i++ {
					if w[i] != "go" || w[i+1] != "build" {
						continue
					}
					var out string
					for j := i + 2; j+1 < len(w); j++ {
						if w[j] == "-o" {
							out = w[j+1]
						}
					}
					if out != "" {
						built[out] = w[len(w)-1]
					}
				}
			}
		case "COPY":
			if len(f) == 4 && strings.HasPrefix(f[1], "--from=") {
				if pkg, ok := built[f[2]]; ok {
					img.binaries[f[3]] = pkg
				}
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, f[0]))), &img.entrypoint); err != nil {
				t.Errorf("Dockerfile: ENTRYPOINT is not in exec form: %v", err)
			}
		}
	}
	return img
}

// flagsOf returns the flags of the command a service runs (the package
// built into its entrypoint) and the arguments the flags are parsed from.
func flagsOf(t *testing.T, service, pkg string, args []string) (*flag.FlagSet, []string) {
	switch pkg {
	case fencedqPkg:
		if len(args) == 0 {
			t.Errorf("%s: no fencedq subcommand", service)
			return nil, nil
		}
		for _, c := range commands {
			if c.name == args[0] {
				fs := flag.NewFlagSet("fencedq "+c.name, flag.ContinueOnError)
				c.setup(fs)
				return fs, args[1:]
			}
		}
		t.Errorf("%s runs unknown subcommand %q", service, args[0])
	case bankWorkerPkg:
		// The flags bank-worker defines: the worker's and the log flags.
		fs := flag.NewFlagSet("bank-worker", flag.ContinueOnError)
		var cfg bank.WorkerConfig
		cfg.AddFlags(fs)
		var logs cli.LogFlags
		logs.Add(fs, slog.LevelInfo)
		return fs, args
	default:
		t.Errorf("%s runs %q, which is none of the commands the image holds", service, pkg)
	}
	return nil, nil
}

var portRe = regexp.MustCompile(`:(\d+)`)

// loopbackPort matches a published port bound to this host's loopback, or
// to a variable defaulting to it.
var loopbackPort = regexp.MustCompile(`^(127\.0\.0\.1|\$\{[A-Z_]+_BIND:-127\.0\.0\.1\}):\d+:\d+$`)

// pinnedImage matches an image tagged with an exact version (major.minor.patch)
// or a digest, never a floating tag such as latest or 7-bookworm.
var pinnedImage = regexp.MustCompile(`^[a-z0-9./_-]+(:v?\d+\.\d+(\.\d+)?[a-z0-9.-]*|@sha256:[0-9a-f]{64})$`)

// TestDockerBuildContext: the Dockerfile's base images are pinned, and
// .dockerignore keeps the history, local binaries and secrets out of the
// build context (COPY . . would ship them).
func TestDockerBuildContext(t *testing.T) {
	root := filepath.Join("..", "..")
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	froms := 0
	for _, line := range strings.Split(string(df), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.EqualFold(f[0], "FROM") {
			froms++
			if !pinnedImage.MatchString(f[1]) {
				t.Errorf("Dockerfile: base image %q is not pinned to an exact version", f[1])
			}
		}
	}
	if froms == 0 {
		t.Error("Dockerfile has no FROM")
	}
	// The history stays out of the context, so the version pools report
	// comes from the VERSION build argument, linked into every binary.
	for _, line := range strings.Split(strings.ReplaceAll(string(df), "\\\n", " "), "\n") {
		for _, c := range strings.Split(line, "&&") {
			if strings.Contains(c, "go build") && !strings.Contains(c, "-X github.com/fencedq/fencedq/jobs.Version=${VERSION}") {
				t.Errorf("Dockerfile: %q does not link the VERSION build argument into jobs.Version", strings.TrimSpace(c))
			}
		}
	}
	di, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	patterns := map[string]bool{}
	for _, line := range strings.Split(string(di), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns[line] = true
		}
	}
	for _, want := range []string{".git", "/fencedq", "**/*.test", ".env"} {
		if !patterns[want] {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
	for _, keep := range []string{"go.mod", "go.sum", "go.work", "cmd", "cmd/go.mod", "*.go", "**/*.go", "jobs", "."} {
		if patterns[keep] {
			t.Errorf(".dockerignore excludes %s, which the build needs", keep)
		}
	}
}

// TestDockerCompose checks docker-compose.yml against this command and the
// repository, since no Docker engine runs here.
func TestDockerCompose(t *testing.T) {
	root := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	img := readDockerfile(t, string(df))
	if len(img.entrypoint) == 0 || img.binaries[img.entrypoint[0]] != fencedqPkg {
		t.Errorf("the image's entrypoint %v is not the fencedq command it builds (%v)", img.entrypoint, img.binaries)
	}
	for _, want := range []string{"redis", "postgres", "worker", "dashboard", "prometheus"} {
		if _, ok := cf.Services[want]; !ok {
			t.Errorf("service %s missing", want)
		}
	}
	if !strings.Contains(string(raw), "replicas: 2") || !strings.Contains(string(raw), `"--appendonly", "yes"`) {
		t.Error("want 2 worker replicas and Redis with AOF on")
	}
	for name, svc := range cf.Services {
		if svc.Restart != "unless-stopped" && svc.Restart != "always" {
			t.Errorf("%s: restart policy %q, want unless-stopped or always", name, svc.Restart)
		}
		if svc.Image != "" && !pinnedImage.MatchString(svc.Image) {
			t.Errorf("%s: image %q is not pinned to an exact version", name, svc.Image)
		}
		if svc.Healthcheck == nil || len(svc.Healthcheck.Test) == 0 {
			t.Errorf("%s: no health check", name)
		}
		for dep := range svc.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				t.Errorf("%s depends on unknown service %s", name, dep)
			}
		}
		// Published ports serve this host only by default: the dashboard
		// acts once credentials are set, Prometheus has none and shows
		// queue names and job counts. [host address:]published:container,
		// the address may be a ${VAR:-default}, itself holding a colon.
		for _, p := range svc.Ports {
			if !loopbackPort.MatchString(p) {
				t.Errorf("%s publishes %s on every interface by default: bind it to 127.0.0.1 (${%s_BIND:-127.0.0.1}:...)", name, p, strings.ToUpper(name))
			}
		}
		for _, v := range svc.Volumes {
			src := strings.Split(v, ":")[0]
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("%s mounts missing file %s", name, src)
				}
			} else if _, ok := cf.Volumes[src]; !ok {
				t.Errorf("%s uses undeclared volume %s", name, src)
			}
		}
		if svc.Build == nil {
			if svc.Image == "" {
				t.Errorf("%s has neither image nor build", name)
			}
			continue
		}
		ctxDir, _ := svc.Build.(string)
		if b, ok := svc.Build.(map[string]any); ok {
			ctxDir, _ = b["context"].(string)
			if args, _ := b["args"].(map[string]any); args != nil {
				if _, ok := args["VERSION"]; !ok {
					t.Errorf("%s: the build passes no VERSION (the version its pools report)", name)
				}
			}
		}
		if ctxDir == "" {
			t.Errorf("%s: build has no context", name)
		}
		if _, err := os.Stat(filepath.Join(root, ctxDir, "Dockerfile")); err != nil {
			t.Errorf("%s: build context %q has no Dockerfile", name, ctxDir)
		}
		// The service runs the image's entrypoint, or its own.
		entrypoint := img.entrypoint
		if len(svc.Entrypoint) > 0 {
			entrypoint = svc.Entrypoint
		}
		if len(entrypoint) == 0 {
			t.Errorf("%s: no entrypoint", name)
			continue
		}
		pkg, ok := img.binaries[entrypoint[0]]
		if !ok {
			t.Errorf("%s: entrypoint %s is not a binary the Dockerfile builds (%v)", name, entrypoint[0], img.binaries)
			continue
		}
		if want := map[string]string{"worker": bankWorkerPkg, "dashboard": fencedqPkg}[name]; want != "" && pkg != want {
			t.Errorf("%s runs %s (%s), want %s", name, entrypoint[0], pkg, want)
		}
		fs, args := flagsOf(t, name, pkg, append(entrypoint[1:len(entrypoint):len(entrypoint)], svc.Command...))
		if fs == nil {
			continue
		}
		fs.SetOutput(io.Discard)
		if err := fs.Parse(args); err != nil {
			t.Errorf("%s: command %v: %v", name, svc.Command, err)
		}
		if pkg == bankWorkerPkg {
			timeout, err := time.ParseDuration(fs.Lookup("shutdown-timeout").Value.String())
			if err != nil {
				t.Fatal(err)
			}
			checkStopGrace(t, name, svc.StopGrace, timeout)
		}
		if fs.NArg() > 0 {
			t.Errorf("%s: command %v: unexpected argument %q", name, svc.Command, fs.Arg(0))
		}
		for k := range svc.Environment {
			if !strings.HasPrefix(k, "FENCEDQ_") {
				continue
			}
			fl := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "FENCEDQ_"), "_", "-"))
			if fs.Lookup(fl) == nil {
				t.Errorf("%s: %s names no flag of %s", name, k, fs.Name())
			} else if !slices.Contains(cli.EnvFlags(), fl) {
				t.Errorf("%s: %s names --%s, which the environment does not set (%s ignores it)", name, k, fl, fs.Name())
			}
		}
		// The ports it listens on must be the ones published, exposed and health-checked.
		var listen []string
		for _, f := range []string{"addr", "metrics-addr"} {
			if fl := fs.Lookup(f); fl != nil && fl.Value.String() != fl.DefValue {
				if m := portRe.FindStringSubmatch(fl.Value.String()); m != nil {
					listen = append(listen, m[1])
				}
			}
		}
		published := strings.Join(svc.Ports, " ") + " " + strings.Join(svc.Expose, " ")
		for _, p := range listen {
			if !strings.Contains(published, p) {
				t.Errorf("%s listens on %s but neither publishes nor exposes it", name, p)
			}
			if !strings.Contains(strings.Join(svc.Healthcheck.Test, " "), ":"+p+"/healthz") {
				t.Errorf("%s: health check does not probe port %s", name, p)
			}
		}
		for _, p := range svc.Ports {
			// [host address:]published:container (the address may be a
			// ${VAR:-default}, itself holding a colon)
			parts := strings.Split(p, ":")
			if len(parts) < 2 || !contains(listen, parts[len(parts)-1]) {
				t.Errorf("%s publishes %s, which it does not listen on (%v)", name, p, listen)
			}
		}
	}
	prom, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{`"worker"`, "port: 9100", "dashboard:8080", "/etc/prometheus/alerts.yml"} {
		if !strings.Contains(string(prom), target) {
			t.Errorf("prometheus.yml lacks %s", target)
		}
	}
}

// checkStopGrace checks that docker compose stop waits for a worker pool's
// graceful shutdown before it kills the process: Docker sends SIGTERM,
// then SIGKILL after stop_grace_period (10s when unset), and a pool's Run
// takes up to its shutdown timeout plus worker.ShutdownGrace to commit the
// outcomes of its running handlers.
func checkStopGrace(t *testing.T, name, grace string, shutdownTimeout time.Duration) {
	t.Helper()
	need := shutdownTimeout + worker.ShutdownGrace
	if grace == "" {
		t.Errorf("%s runs a worker pool without stop_grace_period: Docker kills it 10s after SIGTERM, before its graceful shutdown (up to %v) ends", name, need)
		return
	}
	d, err := time.ParseDuration(grace)
	if err != nil {
		t.Errorf("%s: stop_grace_period %q: %v", name, grace, err)
		return
	}
	if d <= need {
		t.Errorf("%s: stop_grace_period %v: a worker pool's graceful shutdown takes up to %v", name, d, need)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestComposeOperatorCommandsFence: the dashboard service, whose image
// runs the operator commands (docker compose run --rm dashboard resolve),
// names the store the workers write through as its fence store, so a
// re-run of an uncertain job fences its attempt out of it.
func TestComposeOperatorCommandsFence(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatal(err)
	}
	store := cf.Services["worker"].Environment["FENCEDQ_POSTGRES"]
	if store == "" {
		t.Fatal("the workers name no PostgreSQL store (FENCEDQ_POSTGRES)")
	}
	if got := cf.Services["dashboard"].Environment["FENCEDQ_FENCE_POSTGRES"]; got != store {
		t.Errorf("dashboard's FENCEDQ_FENCE_POSTGRES = %q, want the workers' store %q", got, store)
	}
}
