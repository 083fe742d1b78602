package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Exporter names of OTEL_TRACES_EXPORTER that the gateway knows.
const (
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"
)

// OTLP transport protocols (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config is what the OTEL_* environment asks of tracing.
type Config struct {
	// Exporters are the span exporters to run (ExporterOTLP,
	// ExporterConsole); none means tracing is off.
	Exporters []string
	// Protocol is the OTLP exporter's transport.
	Protocol string
}

// Enabled reports whether the configuration installs any exporter.
func (c Config) Enabled() bool { return len(c.Exporters) > 0 }

// ConfigFromEnv reads the standard variables, with getenv (os.Getenv):
//
//   - OTEL_SDK_DISABLED=true turns tracing off whatever else is set;
//   - OTEL_TRACES_EXPORTER lists exporters: otlp, console, or none;
//   - without it, tracing is on (OTLP) only when an OTLP endpoint is set
//     (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
//     so a deployment that sets nothing exports nothing, and pays nothing;
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
//     chooses http/protobuf (the default) or grpc.
//
// The exporters themselves read the endpoint, headers, timeout, compression
// and certificate variables; the SDK reads the sampler (OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG) and batching (OTEL_BSP_*) ones, and the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	names := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if names == "" {
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return c, nil
		}
		names = ExporterOTLP
	}
	for n := range strings.SplitSeq(names, ",") {
		switch n = strings.ToLower(strings.TrimSpace(n)); n {
		case "none":
			return Config{}, nil
		case ExporterOTLP, ExporterConsole:
			c.Exporters = append(c.Exporters, n)
		default:
			return Config{}, fmt.Errorf("OTEL_TRACES_EXPORTER: unsupported exporter %q (otlp, console or none)", n)
		}
	}
	c.Protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if c.Protocol == "" {
		c.Protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return Config{}, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: unsupported protocol %q (http/protobuf or grpc)", c.Protocol)
	}
	return c, nil
}

// Setup configures tracing from the process environment (ConfigFromEnv).
// When the environment asks for no exporter it installs nothing. Otherwise
// it installs a batching tracer provider (for the gateway's spans and as
// OpenTelemetry's global provider) whose resource names the service
// (OTEL_SERVICE_NAME overrides service). shutdown flushes the spans still
// batched; it is never nil.
func Setup(ctx context.Context, service, version string) (shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil || !cfg.Enabled() {
		return none, err
	}
	tp, err := NewProvider(ctx, cfg, service, version)
	if err != nil {
		return none, err
	}
	otel.SetTracerProvider(tp)
	Use(tp)
	return func(ctx context.Context) error {
		Use(nil)
		return tp.Shutdown(ctx)
	}, nil
}

// NewProvider builds the tracer provider of cfg: one batching processor per
// exporter, and the service's resource.
func NewProvider(ctx context.Context, cfg Config, service, version string) (*sdktrace.TracerProvider, error) {
	res, err := serviceResource(service, version)
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, name := range cfg.Exporters {
		var exp sdktrace.SpanExporter
		switch {
		case name == ExporterConsole:
			exp, err = stdouttrace.New()
		case cfg.Protocol == ProtocolGRPC:
			exp, err = otlptracegrpc.New(ctx)
		default:
			exp, err = otlptracehttp.New(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("trace exporter %s: %w", name, err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	if len(opts) == 1 {
		return nil, errors.New("no trace exporter configured")
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

// serviceResource is the SDK's default resource (telemetry.sdk.*), then
// service.name and service.version, then what the environment sets
// (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES), each overriding the one
// before.
func serviceResource(service, version string) (*resource.Resource, error) {
	ours := resource.NewSchemaless(semconv.ServiceName(service), semconv.ServiceVersion(version))
	res, err := resource.Merge(resource.Default(), ours)
	if err != nil {
		return nil, err
	}
	return resource.Merge(res, resource.Environment())
}
