package simulated_test

import (
	"context"
	"io"
	"testing"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
)

var benchBody = []byte(`{"model":"claude-client","max_tokens":1024,"system":"You are a helpful assistant.","messages":[{"role":"user","content":"Write a short poem about load balancers. [sim:tokens=100]"}]}`)

var benchStreamBody = []byte(`{"model":"claude-client","max_tokens":1024,"stream":true,"system":"You are a helpful assistant.","messages":[{"role":"user","content":"Write a short poem about load balancers. [sim:tokens=100,chunk=4]"}]}`)

// BenchmarkInvokePassThrough: a messages client on the messages-speaking
// simulator, non-streaming (model rewrite only, no translation).
func BenchmarkInvokePassThrough(b *testing.B) {
	p := simulated.New(upstream.Messages)
	be := upstream.Backend{Name: "sim", UpstreamModel: "sim-model"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := upstream.Invoke(ctx, p, be, upstream.Request{Protocol: upstream.Messages, Body: benchBody})
		if err != nil {
			b.Fatal(err)
		}
		res.Close()
	}
}

func drainBench(b *testing.B, res *upstream.Result) {
	for {
		if _, err := res.Stream.Next(); err != nil {
			if err != io.EOF {
				b.Fatal(err)
			}
			break
		}
	}
	res.Close()
}

// BenchmarkInvokePassThroughStream: messages stream, 100 tokens in chunks
// of 4, passed through.
func BenchmarkInvokePassThroughStream(b *testing.B) {
	p := simulated.New(upstream.Messages)
	be := upstream.Backend{Name: "sim", UpstreamModel: "sim-model"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := upstream.Invoke(ctx, p, be, upstream.Request{Protocol: upstream.Messages, Body: benchStreamBody, Stream: true})
		if err != nil {
			b.Fatal(err)
		}
		drainBench(b, res)
	}
}

// BenchmarkInvokeTranslatedStream: a messages client on the chat-speaking
// simulator, streaming: request, chunks and usage are translated.
func BenchmarkInvokeTranslatedStream(b *testing.B) {
	p := simulated.New(upstream.ChatCompletions)
	be := upstream.Backend{Name: "sim", UpstreamModel: "sim-model"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := upstream.Invoke(ctx, p, be, upstream.Request{Protocol: upstream.Messages, Body: benchStreamBody, Stream: true})
		if err != nil {
			b.Fatal(err)
		}
		drainBench(b, res)
	}
}
