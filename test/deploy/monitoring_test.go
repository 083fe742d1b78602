package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var (
	metricName = regexp.MustCompile(`\bmodelgate_[a-z_]+`)
	definedAs  = regexp.MustCompile(`Name:\s*"(modelgate_[a-z_]+)"`)
)

// definedMetrics are the metric names the code registers (gateway/platform/metrics).
func definedMetrics(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(root, "gateway", "platform", "metrics", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("metric sources: %v", err)
	}
	var names []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range definedAs.FindAllStringSubmatch(string(src), -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// usedMetrics are the modelgate_ metric names a query text names, with the
// histogram suffixes taken off.
func usedMetrics(text string) []string {
	var out []string
	for _, n := range metricName.FindAllString(text, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			n = strings.TrimSuffix(n, suffix)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func TestHelmTemplateDashboardAndAlerts(t *testing.T) {
	g := NewWithT(t)
	defined := definedMetrics(t)
	objs := helmTemplate(t, "-f", "test/deploy/testdata/full-values.yaml")

	cm := find(objs, "ConfigMap", "modelgate-dashboard")
	g.Expect(cm).NotTo(BeNil(), "the dashboard ConfigMap")
	g.Expect(cm.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"), "the Grafana sidecar's label")
	g.Expect(cm.GetAnnotations()).To(HaveKeyWithValue("grafana_folder", "modelgate"))
	raw := nested(cm, "data", "modelgate.json").(string)
	var dash struct {
		UID        string
		Templating struct{ List []struct{ Name string } }
		Panels     []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	g.Expect(json.Unmarshal([]byte(raw), &dash)).To(Succeed(), "the dashboard is valid JSON")
	g.Expect(dash.UID).To(Equal("modelgate-overview"))
	var variables []string
	for _, v := range dash.Templating.List {
		variables = append(variables, v.Name)
	}
	g.Expect(variables).To(ContainElements("datasource", "namespace", "tenant"))
	var queries strings.Builder
	for _, p := range dash.Panels {
		g.Expect(p.Targets).NotTo(BeEmpty(), "panel %q has a query", p.Title)
		for _, q := range p.Targets {
			queries.WriteString(q.Expr + "\n")
		}
	}
	used := usedMetrics(queries.String())
	g.Expect(defined).To(ContainElements(used), "every metric the dashboard plots exists")
	g.Expect(used).To(ContainElements("modelgate_requests_total", "modelgate_request_duration_seconds",
		"modelgate_upstream_errors_total", "modelgate_upstream_attempts_total", "modelgate_tokens_total",
		"modelgate_quota_charged_total", "modelgate_tenant_tokens_total", "modelgate_tenant_quota_charged_total",
		"modelgate_reservations_refused_total", "modelgate_usage_queue_depth", "modelgate_usage_spool_rows"))
	g.Expect(queries.String()).To(ContainSubstring(`tenant=~"$tenant"`), "the tenant panels follow the tenant variable")

	rule := find(objs, "PrometheusRule", "modelgate")
	g.Expect(rule).NotTo(BeNil(), "the PrometheusRule")
	g.Expect(rule.GetLabels()).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
	groups := nested(rule, "spec", "groups").([]any)
	alerts := map[string]string{}
	for _, grp := range groups {
		for _, r := range grp.(map[string]any)["rules"].([]any) {
			r := r.(map[string]any)
			alerts[r["alert"].(string)] = r["expr"].(string)
		}
	}
	g.Expect(alerts).To(HaveKey("ModelgateUsageSpoolGrowing"))
	g.Expect(alerts).To(HaveKey("ModelgateUpstreamErrorRatio"))
	g.Expect(alerts).To(HaveKey("ModelgateReservationsRefused"))
	g.Expect(alerts).To(HaveKey("ModelgateManagerWithoutLeader"))
	g.Expect(alerts).To(HaveKey("ModelgateBudgetAlert"))
	g.Expect(usedMetrics(alerts["ModelgateBudgetAlert"])).To(ConsistOf("modelgate_budget_alerts_total"))
	g.Expect(alerts["ModelgateBudgetAlert"]).To(ContainSubstring("[1h]"), "the window comes from the values")
	g.Expect(alerts["ModelgateUpstreamErrorRatio"]).To(ContainSubstring("> 0.1"), "the threshold comes from the values")
	g.Expect(usedMetrics(alerts["ModelgateUpstreamErrorRatio"])).To(ConsistOf("modelgate_upstream_errors_total", "modelgate_upstream_attempts_total"),
		"failed attempts over all attempts, not over finished requests")
	g.Expect(usedMetrics(alerts["ModelgateUsageSpoolGrowing"])).To(ConsistOf("modelgate_usage_spool_rows"))
	g.Expect(usedMetrics(alerts["ModelgateReservationsRefused"])).To(ConsistOf("modelgate_reservations_refused_total"))
	g.Expect(alerts["ModelgateManagerWithoutLeader"]).To(ContainSubstring("leader_election_master_status"))
	for name, expr := range alerts {
		g.Expect(expr).To(ContainSubstring(`namespace="`+SystemNamespace+`"`), "%s is scoped to the release", name)
		g.Expect(defined).To(ContainElements(usedMetrics(expr)), "every metric %s reads exists", name)
	}

	applyDryRun(t, objs)
}

func TestHelmTemplateMonitoringOffByDefault(t *testing.T) {
	g := NewWithT(t)
	objs := helmTemplate(t)
	g.Expect(kinds(objs)).NotTo(HaveKey("PrometheusRule"))
	g.Expect(find(objs, "ConfigMap", "modelgate-dashboard")).To(BeNil())
}

// TestHelmTemplateTracing: tracing.enabled sets the standard OTEL_*
// variables on both components, each under its own service name; by
// default no OTEL_* variable is set, so the binaries install no tracer.
func TestHelmTemplateTracing(t *testing.T) {
	g := NewWithT(t)
	env := func(d *unstructured.Unstructured) map[string]string {
		out := map[string]string{}
		list, _ := container(d)["env"].([]any)
		for _, e := range list {
			e := e.(map[string]any)
			v, _ := e["value"].(string)
			out[e["name"].(string)] = v
		}
		return out
	}
	objs := helmTemplate(t, "-f", "test/deploy/testdata/full-values.yaml")
	for _, component := range []string{"gateway", "manager"} {
		d := find(objs, "Deployment", "modelgate-"+component)
		g.Expect(d).NotTo(BeNil())
		e := env(d)
		g.Expect(e).To(HaveKeyWithValue("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector.monitoring:4317"), component)
		g.Expect(e).To(HaveKeyWithValue("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), component)
		g.Expect(e).To(HaveKeyWithValue("OTEL_SERVICE_NAME", "modelgate-"+component))
		g.Expect(e).To(HaveKeyWithValue("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"), component)
		g.Expect(e).To(HaveKeyWithValue("OTEL_TRACES_SAMPLER_ARG", "0.25"), component)
		g.Expect(e).To(HaveKeyWithValue("OTEL_RESOURCE_ATTRIBUTES",
			"k8s.namespace.name="+SystemNamespace+",deployment.environment.name=production"), component)
	}

	for _, o := range helmTemplate(t) {
		if o.GetKind() != "Deployment" {
			continue
		}
		for _, name := range envNames(o) {
			g.Expect(name).NotTo(HavePrefix("OTEL_"), "%s sets %s by default", o.GetName(), name)
		}
	}
	_, err := runTool(helmBin, "template", "modelgate", "charts/modelgate", "--set", "tracing.enabled=true")
	g.Expect(err).To(HaveOccurred(), "tracing without an endpoint is refused")
}
