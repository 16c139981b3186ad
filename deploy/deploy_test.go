// Package deploy holds what runs Sluice elsewhere than a terminal: the
// Dockerfile's companions, the compose file, the Kubernetes manifests, the
// Prometheus rules and the Grafana dashboard. Nothing here can be built or
// applied in CI (no container engine, no cluster), so its tests check what
// can be checked: every file parses, the manifests agree with the gateway
// (probes on paths its admin listener serves, a grace period that covers
// its drain, catalogs that load with the environment the manifests give),
// the rules pass promtool, and every metric the rules and the dashboard
// name is one a real gateway exports.
package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/config"
)

// decodeAll decodes every YAML document of the file at path.
func decodeAll(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if err.Error() == "EOF" {
				return docs
			}
			t.Fatalf("%s: %v", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// manifests are the Kubernetes objects of deploy/kubernetes, by kind.
func manifests(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("kubernetes manifests: %v, %v", files, err)
	}
	byKind := map[string]map[string]any{}
	for _, f := range files {
		for _, doc := range decodeAll(t, f) {
			kind, _ := doc["kind"].(string)
			if kind == "" || doc["apiVersion"] == nil {
				t.Errorf("%s: a document without kind or apiVersion", f)
			}
			if byKind[kind] != nil {
				t.Errorf("%s: a second %s: the test reads one of each", f, kind)
			}
			byKind[kind] = doc
		}
	}
	return byKind
}

// dig walks m by keys (a string indexes a map, an int a list).
func dig(m any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			mm, _ := m.(map[string]any)
			m = mm[k]
		case int:
			l, _ := m.([]any)
			if k >= len(l) {
				return nil
			}
			m = l[k]
		}
	}
	return m
}

// k8sCatalog is the catalog text of the ConfigMap.
func k8sCatalog(t *testing.T, objs map[string]map[string]any) string {
	t.Helper()
	doc, _ := dig(objs["ConfigMap"], "data", "catalog.yaml").(string)
	if doc == "" {
		t.Fatal("the ConfigMap has no data.catalog.yaml")
	}
	return doc
}

// loadCatalog loads doc with internal/config, given only the environment
// variables env names.
func loadCatalog(t *testing.T, what, doc string, env map[string]string) *config.Catalog {
	t.Helper()
	cat, err := config.Load([]byte(doc), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("%s does not load with the environment %v: %v", what, keys(env), err)
	}
	return cat
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// The ConfigMap's catalog loads given exactly the Secret's variables, and
// is the compose file's catalog.
func TestKubernetesCatalogLoadsWithTheSecret(t *testing.T) {
	objs := manifests(t)
	secret, _ := dig(objs["Secret"], "stringData").(map[string]any)
	env := map[string]string{}
	for k, v := range secret {
		env[k] = fmt.Sprint(v)
	}
	doc := k8sCatalog(t, objs)
	loadCatalog(t, "the ConfigMap's catalog", doc, env)
	if name := dig(objs["Deployment"], "spec", "template", "spec", "containers", 0, "envFrom", 0, "secretRef", "name"); name != dig(objs["Secret"], "metadata", "name") {
		t.Errorf("the container's envFrom names Secret %v, want %v", name, dig(objs["Secret"], "metadata", "name"))
	}
	compose, err := os.ReadFile("compose/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if doc != string(compose) {
		t.Error("the ConfigMap's catalog.yaml differs from compose/catalog.yaml: keep them one catalog")
	}
	for _, v := range secret {
		if s := fmt.Sprint(v); !strings.Contains(s, "REPLACE-ME") {
			t.Errorf("Secret value %q is not an obvious placeholder (REPLACE-ME)", s)
		}
	}
}

// The catalog each compose replica mounts loads with the environment the
// compose file gives it; the replicas share it, with Redis and PostgreSQL
// beside them, and every service has a healthcheck.
func TestComposeReplicasShareALoadableCatalog(t *testing.T) {
	docs := decodeAll(t, "compose/compose.yaml")
	if len(docs) != 1 {
		t.Fatalf("compose.yaml holds %d documents, want 1", len(docs))
	}
	services, _ := docs[0]["services"].(map[string]any)
	var replicas []string
	for name, svc := range services {
		if dig(svc, "healthcheck", "test") == nil {
			t.Errorf("service %s has no healthcheck", name)
		}
		if strings.HasPrefix(name, "sluice-") {
			replicas = append(replicas, name)
		}
	}
	if len(replicas) != 3 || services["postgres"] == nil || services["redis"] == nil {
		t.Fatalf("services = %v, want three sluice replicas, postgres and redis", keys(toStrings(services)))
	}
	for _, name := range replicas {
		svc := services[name]
		vols, _ := dig(svc, "volumes").([]any)
		if !slices.Contains(vols, any("./catalog.yaml:/etc/sluice/catalog.yaml:ro")) {
			t.Errorf("%s does not mount the shared catalog: volumes %v", name, vols)
		}
		environ, _ := dig(svc, "environment").(map[string]any)
		env := map[string]string{}
		for k, v := range environ {
			env[k] = composeVariable.ReplaceAllString(fmt.Sprint(v), "placeholder")
		}
		doc, err := os.ReadFile("compose/catalog.yaml")
		if err != nil {
			t.Fatal(err)
		}
		loadCatalog(t, name+"'s catalog", string(doc), env)
	}
}

// composeVariable is a variable compose substitutes from the shell's
// environment or .env: ${NAME}, ${NAME:?message}, ${NAME:-default}.
var composeVariable = regexp.MustCompile(`\$\{[A-Z0-9_]+(:?[?-][^}]*)?\}`)

func toStrings(m map[string]any) map[string]string {
	out := map[string]string{}
	for k := range m {
		out[k] = ""
	}
	return out
}

// Settling after the grace (internal/app's settleBound, 15s) and stopping
// the admin API (adminBound, 5s) come after server.shutdown_grace.
const drainAfterGrace = 20 * time.Second

// The Deployment runs three replicas, probes liveness and readiness on two
// paths of the admin port, and gives the pod time for its preStop sleep,
// the catalog's shutdown grace and the drain after it.
func TestDeploymentProbesAndGrace(t *testing.T) {
	objs := manifests(t)
	dep := objs["Deployment"]
	if r := dig(dep, "spec", "replicas"); r != 3 {
		t.Errorf("replicas = %v, want 3", r)
	}
	pod := dig(dep, "spec", "template", "spec")
	ctr := dig(pod, "containers", 0)
	adminPort := 0
	ports, _ := dig(ctr, "ports").([]any)
	for _, p := range ports {
		if dig(p, "name") == "admin" {
			adminPort, _ = dig(p, "containerPort").(int)
		}
	}
	cat := loadCatalog(t, "the ConfigMap's catalog", k8sCatalog(t, objs), secretEnv(objs))
	if want := ":" + fmt.Sprint(adminPort); adminPort == 0 || !strings.HasSuffix(cat.Server.AdminListen, want) {
		t.Errorf("container port admin = %d, catalog's admin_listen %q: want them the same port", adminPort, cat.Server.AdminListen)
	}
	paths := map[string]string{}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		port := dig(ctr, probe, "httpGet", "port")
		if port != "admin" && port != adminPort {
			t.Errorf("%s port = %v, want the admin port", probe, port)
		}
		paths[probe], _ = dig(ctr, probe, "httpGet", "path").(string)
	}
	if paths["livenessProbe"] != "/healthz" || paths["readinessProbe"] != "/readyz" {
		t.Errorf("probe paths = %v, want liveness /healthz and readiness /readyz", paths)
	}
	gw := scrapeGateway(t)
	for probe, path := range paths {
		resp, err := http.Get("http://" + gw.adminAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("%s: GET %s on a serving gateway's admin listener = %d, want 204", probe, path, resp.StatusCode)
		}
	}
	grace, _ := dig(pod, "terminationGracePeriodSeconds").(int)
	preStop, _ := dig(ctr, "lifecycle", "preStop", "sleep", "seconds").(int)
	need := time.Duration(preStop)*time.Second + cat.Server.ShutdownGrace.D() + drainAfterGrace
	if time.Duration(grace)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds = %d, want at least %s (preStop %ds + shutdown_grace %s + %s)",
			grace, need, preStop, cat.Server.ShutdownGrace.D(), drainAfterGrace)
	}
	if dig(pod, "securityContext", "runAsNonRoot") != true {
		t.Error("the pod does not require runAsNonRoot")
	}
}

func secretEnv(objs map[string]map[string]any) map[string]string {
	env := map[string]string{}
	secret, _ := dig(objs["Secret"], "stringData").(map[string]any)
	for k, v := range secret {
		env[k] = fmt.Sprint(v)
	}
	return env
}

// The Dockerfile builds a static binary and its final stage runs it as a
// non-root user with nothing that needs a shell.
func TestDockerfile(t *testing.T) {
	stages := dockerStages(t, "../Dockerfile")
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	build := strings.Join(stages[0], "\n")
	if !strings.Contains(build, "CGO_ENABLED=0") {
		t.Error("the build stage does not set CGO_ENABLED=0: the runtime image has no libc")
	}
	final := stages[len(stages)-1]
	var user string
	var exposed []string
	for _, ins := range final {
		word, rest, _ := strings.Cut(ins, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			if !strings.Contains(rest, "distroless/static") && !strings.HasPrefix(rest, "scratch") {
				t.Errorf("final stage FROM %s, want distroless/static or scratch", rest)
			}
		case "RUN":
			t.Errorf("final stage runs %q: the runtime image has no shell", ins)
		case "USER":
			user = rest
		case "EXPOSE":
			exposed = strings.Fields(rest)
		case "ENTRYPOINT", "CMD":
			if !strings.HasPrefix(strings.TrimSpace(rest), "[") {
				t.Errorf("%s in shell form (%s): without a shell it must be an exec-form list", word, rest)
			}
		}
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		t.Errorf("final stage USER = %q, want a non-root user", user)
	}
	if !slices.Equal(exposed, []string{"8080", "8081"}) {
		t.Errorf("EXPOSE %v, want 8080 8081", exposed)
	}
}

// dockerStages returns the instructions of each stage of the Dockerfile
// at path, continuation lines joined, comments left out.
func dockerStages(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]string
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur == "") {
			continue
		}
		if more, ok := strings.CutSuffix(line, "\\"); ok {
			cur += more + " "
			continue
		}
		ins := strings.TrimSpace(cur + line)
		cur = ""
		if strings.HasPrefix(strings.ToUpper(ins), "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %q before the first FROM", path, ins)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], ins)
	}
	return stages
}

// promtool checks the rules and runs their unit tests. It comes with
// Debian's prometheus package; without it the test skips, except under
// CI=true.
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found; CI needs it (apt-get install prometheus)")
		}
		t.Skip("promtool not found (apt-get install prometheus): the rules are not checked")
	}
	for _, args := range [][]string{{"check", "rules", "sluice-rules.yaml"}, {"test", "rules", "sluice-rules.test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// metricName finds the Sluice metrics a PromQL expression names (a
// histogram by its _bucket series).
var metricName = regexp.MustCompile(`\bsluice_[a-z0-9_]+\b`)

// namedMetrics returns every metric named by the rules' and the
// dashboard's expressions, with where each is named.
func namedMetrics(t *testing.T) map[string]string {
	t.Helper()
	named := map[string]string{}
	add := func(where, expr string) {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q names no Sluice metric", where, expr)
		}
		for _, n := range names {
			named[n] = where
		}
	}
	for _, g := range dig(decodeAll(t, "prometheus/sluice-rules.yaml")[0], "groups").([]any) {
		for _, r := range dig(g, "rules").([]any) {
			add("rule "+fmt.Sprint(dig(r, "alert")), fmt.Sprint(dig(r, "expr")))
		}
	}
	b, err := os.ReadFile("grafana/sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana/sluice.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			add("panel "+p.Title, target.Expr)
		}
	}
	return named
}

// Every metric the rules and the dashboard name is in a scrape of a real
// gateway's admin listener, after requests that make each kind of series
// exist (an endpoint whose breaker opened, a billed request).
func TestRulesAndDashboardNameExportedMetrics(t *testing.T) {
	named := namedMetrics(t)
	exported := scrapeGateway(t).scrape(t)
	for name, where := range named {
		if !exported[name] {
			t.Errorf("%s names %s, which a gateway does not export", where, name)
		}
	}
}
