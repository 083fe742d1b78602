package fakeupstream_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

// pathRecorder records the escaped path of each request the SDK sends.
type pathRecorder struct {
	next  http.RoundTripper
	paths []string
}

func (p *pathRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	p.paths = append(p.paths, r.URL.EscapedPath())
	return p.next.RoundTrip(r)
}

func bedrockSDKClient(f *fakeupstream.Server, secret, region string, rec *pathRecorder) *bedrockruntime.Client {
	if rec == nil {
		rec = &pathRecorder{}
	}
	rec.next = fakeupstream.Client().Transport
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       region,
		BaseEndpoint: aws.String(f.URL),
		Credentials:  credentials.NewStaticCredentialsProvider(fakeupstream.BedrockAccessKeyID, secret, ""),
		HTTPClient:   &http.Client{Transport: rec},
		Retryer:      aws.NopRetryer{},
	})
}

// The Bedrock fake against the official SDK (service/bedrockruntime): the
// SDK signs with SigV4, the fake verifies the signature and answers, and
// the SDK decodes the JSON answer, the event stream and the exceptions.
func TestBedrockFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	rec := &pathRecorder{}
	c := bedrockSDKClient(f, f.Key(), fakeupstream.BedrockRegion, rec)
	model := "anthropic.claude-3-5-sonnet-20240620-v1:0"
	in := &bedrockruntime.ConverseInput{
		ModelId: aws.String(model),
		System:  []brtypes.SystemContentBlock{&brtypes.SystemContentBlockMemberText{Value: "be brief"}},
		Messages: []brtypes.Message{{Role: brtypes.ConversationRoleUser,
			Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "hi"}}}},
		InferenceConfig: &brtypes.InferenceConfiguration{MaxTokens: aws.Int32(64), Temperature: aws.Float32(0.5)},
	}
	read, write := int64(7), int64(3)

	f.Enqueue(fakeupstream.Reply{Text: "Hello from Bedrock", Usage: fakeupstream.Usage{InputTokens: 9, OutputTokens: 4, CacheRead: &read, CacheWrite: &write}})
	out, err := c.Converse(ctx, in)
	g.Expect(err).NotTo(HaveOccurred())
	msg, ok := out.Output.(*brtypes.ConverseOutputMemberMessage)
	g.Expect(ok).To(BeTrue(), "%T", out.Output)
	g.Expect(msg.Value.Role).To(Equal(brtypes.ConversationRoleAssistant))
	g.Expect(msg.Value.Content).To(HaveLen(1))
	text, ok := msg.Value.Content[0].(*brtypes.ContentBlockMemberText)
	g.Expect(ok).To(BeTrue(), "%T", msg.Value.Content[0])
	g.Expect(text.Value).To(Equal("Hello from Bedrock"))
	g.Expect(out.StopReason).To(Equal(brtypes.StopReasonEndTurn))
	g.Expect(out.Usage).NotTo(BeNil())
	g.Expect(aws.ToInt32(out.Usage.InputTokens)).To(Equal(int32(9)))
	g.Expect(aws.ToInt32(out.Usage.OutputTokens)).To(Equal(int32(4)))
	g.Expect(aws.ToInt32(out.Usage.CacheReadInputTokens)).To(Equal(int32(7)))
	g.Expect(aws.ToInt32(out.Usage.CacheWriteInputTokens)).To(Equal(int32(3)))
	g.Expect(aws.ToInt32(out.Usage.TotalTokens)).To(Equal(int32(23)))
	g.Expect(out.Metrics).NotTo(BeNil())
	last := f.Last()
	g.Expect(last.Rejected).To(BeFalse())
	g.Expect(last.Path).To(Equal("/model/" + model + "/converse"))
	// The SDK escapes ':' in the model ID label, as the gateway's adapter
	// does (gateway/upstream/bedrock's URL test expects the same form).
	g.Expect(rec.paths[0]).To(Equal("/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"))
	g.Expect(last.Header.Get("Authorization")).To(HavePrefix("AWS4-HMAC-SHA256 Credential=" + fakeupstream.BedrockAccessKeyID + "/"))
	g.Expect(last.Header.Get("Authorization")).To(ContainSubstring("/" + fakeupstream.BedrockRegion + "/bedrock/aws4_request"))

	// An inference profile ARN: '/' inside the label is escaped too.
	arn := "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0"
	f.Enqueue(fakeupstream.Reply{Text: "via a profile"})
	ain := *in
	ain.ModelId = aws.String(arn)
	_, err = c.Converse(ctx, &ain)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Last().Rejected).To(BeFalse())
	g.Expect(rec.paths[1]).To(Equal("/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-sonnet-4-20250514-v1%3A0/converse"))

	// A tool call: the SDK decodes toolUse.input as a document.
	f.Enqueue(fakeupstream.Reply{ToolCall: &fakeupstream.ToolCall{ID: "tooluse_1", Name: "weather", Arguments: `{"city":"Oslo"}`}})
	tin := *in
	tin.ToolConfig = &brtypes.ToolConfiguration{Tools: []brtypes.Tool{&brtypes.ToolMemberToolSpec{Value: brtypes.ToolSpecification{
		Name: aws.String("weather"), InputSchema: &brtypes.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object"})}}}}}
	out, err = c.Converse(ctx, &tin)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.StopReason).To(Equal(brtypes.StopReasonToolUse))
	msg = out.Output.(*brtypes.ConverseOutputMemberMessage)
	use, ok := msg.Value.Content[0].(*brtypes.ContentBlockMemberToolUse)
	g.Expect(ok).To(BeTrue(), "%T", msg.Value.Content[0])
	g.Expect(aws.ToString(use.Value.Name)).To(Equal("weather"))
	var args map[string]any
	g.Expect(use.Value.Input.UnmarshalSmithyDocument(&args)).To(Succeed())
	g.Expect(args).To(Equal(map[string]any{"city": "Oslo"}))

	// The stream: every event the SDK knows, usage in metadata.
	f.Enqueue(fakeupstream.Reply{Text: "Streamed from Bedrock today", Usage: fakeupstream.Usage{InputTokens: 9, OutputTokens: 4, CacheRead: &read, CacheWrite: &write}})
	sout, err := c.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{ModelId: in.ModelId, System: in.System, Messages: in.Messages, InferenceConfig: in.InferenceConfig})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Last().Path).To(Equal("/model/" + model + "/converse-stream"))
	g.Expect(f.Last().Rejected).To(BeFalse())
	stream := sout.GetStream()
	var got strings.Builder
	var kinds []string
	var stop brtypes.StopReason
	var usage *brtypes.TokenUsage
	for ev := range stream.Events() {
		switch e := ev.(type) {
		case *brtypes.ConverseStreamOutputMemberMessageStart:
			kinds = append(kinds, "messageStart")
			g.Expect(e.Value.Role).To(Equal(brtypes.ConversationRoleAssistant))
		case *brtypes.ConverseStreamOutputMemberContentBlockDelta:
			kinds = append(kinds, "contentBlockDelta")
			d, ok := e.Value.Delta.(*brtypes.ContentBlockDeltaMemberText)
			g.Expect(ok).To(BeTrue(), "%T", e.Value.Delta)
			got.WriteString(d.Value)
		case *brtypes.ConverseStreamOutputMemberContentBlockStop:
			kinds = append(kinds, "contentBlockStop")
			g.Expect(aws.ToInt32(e.Value.ContentBlockIndex)).To(Equal(int32(0)))
		case *brtypes.ConverseStreamOutputMemberMessageStop:
			kinds = append(kinds, "messageStop")
			stop = e.Value.StopReason
		case *brtypes.ConverseStreamOutputMemberMetadata:
			kinds = append(kinds, "metadata")
			usage = e.Value.Usage
		default:
			t.Fatalf("unexpected event %T", ev)
		}
	}
	g.Expect(stream.Close()).To(Succeed())
	g.Expect(stream.Err()).NotTo(HaveOccurred())
	g.Expect(got.String()).To(Equal("Streamed from Bedrock today"))
	g.Expect(kinds[0]).To(Equal("messageStart"))
	g.Expect(kinds[len(kinds)-3:]).To(Equal([]string{"contentBlockStop", "messageStop", "metadata"}))
	g.Expect(stop).To(Equal(brtypes.StopReasonEndTurn))
	g.Expect(usage).NotTo(BeNil())
	g.Expect(aws.ToInt32(usage.InputTokens)).To(Equal(int32(9)))
	g.Expect(aws.ToInt32(usage.OutputTokens)).To(Equal(int32(4)))
	g.Expect(aws.ToInt32(usage.CacheReadInputTokens)).To(Equal(int32(7)))
	g.Expect(aws.ToInt32(usage.CacheWriteInputTokens)).To(Equal(int32(3)))

	// An exception mid-stream surfaces as the SDK's typed error.
	f.Enqueue(fakeupstream.Reply{Text: "cut short here", ErrorEvent: true, ErrorEventAfter: 2, ErrorType: "throttlingException", ErrorMessage: "slow down"})
	sout, err = c.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{ModelId: in.ModelId, Messages: in.Messages})
	g.Expect(err).NotTo(HaveOccurred())
	stream = sout.GetStream()
	n := 0
	for range stream.Events() {
		n++
	}
	_ = stream.Close()
	g.Expect(n).To(Equal(2))
	var sthrottle *brtypes.ThrottlingException
	g.Expect(errors.As(stream.Err(), &sthrottle)).To(BeTrue(), "%v", stream.Err())
	g.Expect(sthrottle.ErrorMessage()).To(Equal("slow down"))

	// Scripted errors: the exception name in x-amzn-ErrorType.
	f.Enqueue(fakeupstream.Reply{Status: http.StatusTooManyRequests})
	_, err = c.Converse(ctx, in)
	var throttle *brtypes.ThrottlingException
	g.Expect(errors.As(err, &throttle)).To(BeTrue(), "%v", err)
	g.Expect(throttle.ErrorMessage()).NotTo(BeEmpty())

	// The fake's own validation (a conversation must start with a user
	// message) answers ValidationException.
	bad := *in
	bad.Messages = []brtypes.Message{{Role: brtypes.ConversationRoleAssistant, Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "hi"}}}}
	_, err = c.Converse(ctx, &bad)
	var invalid *brtypes.ValidationException
	g.Expect(errors.As(err, &invalid)).To(BeTrue(), "%v", err)
	g.Expect(invalid.ErrorMessage()).To(ContainSubstring("must start with a user message"))
	g.Expect(f.Last().Rejected).To(BeTrue())

	// A wrong secret or region fails the fake's signature check.
	_, err = bedrockSDKClient(f, "wrong-secret", fakeupstream.BedrockRegion, nil).Converse(ctx, in)
	var rerr interface{ ErrorCode() string }
	g.Expect(errors.As(err, &rerr)).To(BeTrue(), "%v", err)
	g.Expect(rerr.ErrorCode()).To(Equal("InvalidSignatureException"))
	_, err = bedrockSDKClient(f, f.Key(), "eu-west-1", nil).Converse(ctx, in)
	g.Expect(errors.As(err, &rerr)).To(BeTrue(), "%v", err)
	g.Expect(rerr.ErrorCode()).To(Equal("InvalidSignatureException"))
}
