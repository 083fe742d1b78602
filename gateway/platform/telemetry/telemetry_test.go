package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/modelgate/modelgate/gateway/platform/telemetry"
)

func TestConfigFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    telemetry.Config
		wantErr string
	}{
		{name: "nothing set: off", env: nil},
		{name: "endpoint only: otlp over http",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			want: telemetry.Config{Exporters: []string{"otlp"}, Protocol: "http/protobuf"}},
		{name: "traces endpoint only",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"},
			want: telemetry.Config{Exporters: []string{"otlp"}, Protocol: "http/protobuf"}},
		{name: "sdk disabled wins",
			env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
				"OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "exporter none",
			env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}},
		{name: "exporter otlp without an endpoint: the default endpoint",
			env:  map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			want: telemetry.Config{Exporters: []string{"otlp"}, Protocol: "http/protobuf"}},
		{name: "grpc, the traces protocol first",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			want: telemetry.Config{Exporters: []string{"otlp"}, Protocol: "grpc"}},
		{name: "two exporters",
			env:  map[string]string{"OTEL_TRACES_EXPORTER": "otlp, console"},
			want: telemetry.Config{Exporters: []string{"otlp", "console"}, Protocol: "http/protobuf"}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "zipkin"},
		{name: "unsupported protocol",
			env:     map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: "http/json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := telemetry.ConfigFromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
			g.Expect(got.Enabled()).To(Equal(len(tc.want.Exporters) > 0))
		})
	}
}

// clearOTelEnv unsets what the machine may have set, for the test's duration.
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}
}

// TestSetupDefaultInstallsNothing: without OTEL_* configuration no exporter,
// no tracer provider (neither the gateway's nor OpenTelemetry's global),
// and the span helpers hand out no-op spans.
func TestSetupDefaultInstallsNothing(t *testing.T) {
	g := NewWithT(t)
	clearOTelEnv(t)
	before := otel.GetTracerProvider()
	shutdown, err := telemetry.Setup(context.Background(), "modelgate-test", "v0")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = shutdown(context.Background()) }()
	g.Expect(telemetry.Enabled()).To(BeFalse())
	g.Expect(otel.GetTracerProvider()).To(BeIdenticalTo(before), "the global provider is left alone")
	_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	g.Expect(isSDK).To(BeFalse())

	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	r.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	ctx, span := telemetry.StartRequest(r, "chat")
	g.Expect(span.IsRecording()).To(BeFalse())
	g.Expect(ctx).To(BeIdenticalTo(r.Context()), "off, the request's context is not even extended")
	_, child := telemetry.Start(ctx, "admission", trace.SpanKindInternal)
	g.Expect(child.IsRecording()).To(BeFalse())
}

// TestSpansOffAllocateNothing: the request path's span calls cost no
// allocation while tracing is off (the gateway is measured against a bare
// reverse proxy).
func TestSpansOffAllocateNothing(t *testing.T) {
	telemetry.Use(nil)
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	allocs := testing.AllocsPerRun(1000, func() {
		ctx, span := telemetry.StartRequest(r, "chat")
		_, child := telemetry.Start(ctx, "admission", trace.SpanKindInternal)
		if span.IsRecording() || child.IsRecording() {
			t.Fatal("a span records with tracing off")
		}
		child.End()
		span.End()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request with tracing off, want 0", allocs)
	}
}

// TestSetupExportsOverOTLPHTTP: OTEL_EXPORTER_OTLP_ENDPOINT alone turns
// tracing on; spans reach that endpoint over OTLP/HTTP (a collector stand-in
// on loopback) with the service name of OTEL_SERVICE_NAME, when shutdown
// flushes them.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	g := NewWithT(t)
	clearOTelEnv(t)
	var mu sync.Mutex
	var got []*collectortrace.ExportTraceServiceRequest
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusNotFound)
			return
		}
		req := &collectortrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "gateway-under-test")

	shutdown, err := telemetry.Setup(context.Background(), "modelgate-test", "v0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(telemetry.Enabled()).To(BeTrue())
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	_, span := telemetry.StartRequest(r, "chat m")
	g.Expect(span.IsRecording()).To(BeTrue())
	span.End()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.Expect(shutdown(ctx)).To(Succeed())
	g.Expect(telemetry.Enabled()).To(BeFalse(), "shutdown uninstalls the provider")
	mu.Lock()
	defer mu.Unlock()
	g.Expect(got).NotTo(BeEmpty(), "the collector received spans")
	rs := got[0].ResourceSpans[0]
	var service string
	for _, kv := range rs.Resource.Attributes {
		if kv.Key == "service.name" {
			service = kv.Value.GetStringValue()
		}
	}
	g.Expect(service).To(Equal("gateway-under-test"))
	g.Expect(rs.ScopeSpans[0].Spans[0].Name).To(Equal("chat m"))
	g.Expect(rs.ScopeSpans[0].Scope.Name).To(Equal(telemetry.ScopeName))
}

// TestTransportPropagates: an upstream request made under a span carries
// its traceparent; the caller's request is not modified; the span records
// the upstream's status. Off, or without a span, nothing is added.
func TestTransportPropagates(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var seen []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer upstream.Close()
	client := &http.Client{Transport: telemetry.Transport(http.DefaultTransport)}
	send := func(ctx context.Context) *http.Request {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, upstream.URL, nil)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := client.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		return req
	}

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	telemetry.Use(tp)
	defer telemetry.Use(nil)
	ctx, span := tp.Tracer("test").Start(context.Background(), "attempt")
	req := send(ctx)
	span.End()
	g.Expect(req.Header.Get("traceparent")).To(BeEmpty(), "the caller's request is left as it was")
	send(context.Background()) // no span: nothing to propagate
	telemetry.Use(nil)
	send(ctx) // off

	mu.Lock()
	defer mu.Unlock()
	sc := span.SpanContext()
	g.Expect(seen).To(Equal([]string{"00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01", "", ""}))
	spans := exp.GetSpans()
	g.Expect(spans).To(HaveLen(1))
	g.Expect(spans[0].Attributes).To(ContainElement(telemetry.HTTPStatusCode.Int(http.StatusAccepted)))
}
