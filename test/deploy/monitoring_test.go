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
)

var (
	metricName = regexp.MustCompile(`\bmodelgate_[a-z_]+`)
	definedAs  = regexp.MustCompile(`Name:\s*"(modelgate_[a-z_]+)"`)
)

// definedMetrics are the metric names the code registers (gateway/metrics).
func definedMetrics(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(root, "gateway", "metrics", "*.go"))
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
		UID    string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	g.Expect(json.Unmarshal([]byte(raw), &dash)).To(Succeed(), "the dashboard is valid JSON")
	g.Expect(dash.UID).To(Equal("modelgate-overview"))
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
		"modelgate_upstream_errors_total", "modelgate_tokens_total", "modelgate_quota_charged_total",
		"modelgate_usage_queue_depth", "modelgate_usage_spool_rows"))

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
	g.Expect(alerts["ModelgateUpstreamErrorRatio"]).To(ContainSubstring("> 0.1"), "the threshold comes from the values")
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
