package fakeupstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrock"
	btypes "github.com/aws/aws-sdk-go-v2/service/bedrock/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

// The Bedrock fake's batch inference against the official SDKs
// (service/bedrock for the control plane, service/s3 with its default
// checksums): the SDKs sign, the fake verifies, and the SDKs decode the
// job, its statuses, the stored objects and the exceptions.
func TestBedrockBatchFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	f.SetBatchMinRecords(2)
	creds := credentials.NewStaticCredentialsProvider(fakeupstream.BedrockAccessKeyID, f.Key(), "")
	httpClient := &http.Client{Transport: fakeupstream.Client().Transport}
	bc := bedrock.New(bedrock.Options{Region: fakeupstream.BedrockRegion, BaseEndpoint: aws.String(f.URL),
		Credentials: creds, HTTPClient: httpClient, Retryer: aws.NopRetryer{}})
	sc := s3.New(s3.Options{Region: fakeupstream.BedrockRegion, BaseEndpoint: aws.String(f.URL), UsePathStyle: true,
		Credentials: creds, HTTPClient: httpClient, Retryer: aws.NopRetryer{}})

	var in bytes.Buffer
	for i := range 3 {
		fmt.Fprintf(&in, `{"recordId":"rec%d","modelInput":{"anthropic_version":%q,"max_tokens":16,"messages":[{"role":"user","content":"hi %d"}]}}`+"\n",
			i, fakeupstream.BedrockAnthropicVersion, i)
	}
	_, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("sdk-bucket"), Key: aws.String("in/input.jsonl"), Body: bytes.NewReader(in.Bytes())})
	g.Expect(err).NotTo(HaveOccurred())

	created, err := bc.CreateModelInvocationJob(ctx, &bedrock.CreateModelInvocationJobInput{
		JobName: aws.String("sdk-job"), ModelId: aws.String("anthropic.claude-3-5-haiku-20241022-v1:0"),
		RoleArn: aws.String("arn:aws:iam::123456789012:role/batch"),
		InputDataConfig: &btypes.ModelInvocationJobInputDataConfigMemberS3InputDataConfig{Value: btypes.ModelInvocationJobS3InputDataConfig{
			S3Uri: aws.String("s3://sdk-bucket/in/input.jsonl"), S3InputFormat: btypes.S3InputFormatJsonl}},
		OutputDataConfig: &btypes.ModelInvocationJobOutputDataConfigMemberS3OutputDataConfig{Value: btypes.ModelInvocationJobS3OutputDataConfig{
			S3Uri: aws.String("s3://sdk-bucket/out/")}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	arn := aws.ToString(created.JobArn)
	g.Expect(arn).To(MatchRegexp(`^arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/[a-z0-9]{12}$`))

	var job *bedrock.GetModelInvocationJobOutput
	g.Eventually(func(g Gomega) {
		job, err = bc.GetModelInvocationJob(ctx, &bedrock.GetModelInvocationJobInput{JobIdentifier: aws.String(arn)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(job.Status).To(Equal(btypes.ModelInvocationJobStatusCompleted))
	}).WithTimeout(5 * time.Second).WithPolling(10 * time.Millisecond).Should(Succeed())
	g.Expect(aws.ToString(job.JobName)).To(Equal("sdk-job"))
	g.Expect(aws.ToInt64(job.SuccessRecordCount)).To(Equal(int64(3)))
	g.Expect(job.SubmitTime).NotTo(BeNil())
	g.Expect(job.EndTime).NotTo(BeNil())
	out, ok := job.OutputDataConfig.(*btypes.ModelInvocationJobOutputDataConfigMemberS3OutputDataConfig)
	g.Expect(ok).To(BeTrue())
	g.Expect(aws.ToString(out.Value.S3Uri)).To(Equal("s3://sdk-bucket/out/"))

	id := arn[strings.LastIndex(arn, "/")+1:]
	obj, err := sc.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("sdk-bucket"), Key: aws.String("out/" + id + "/input.jsonl.out")})
	g.Expect(err).NotTo(HaveOccurred())
	defer obj.Body.Close()
	dec := json.NewDecoder(obj.Body)
	n := 0
	for dec.More() {
		var rec struct {
			RecordID    string `json:"recordId"`
			ModelOutput struct {
				Type  string         `json:"type"`
				Usage map[string]int `json:"usage"`
			} `json:"modelOutput"`
		}
		g.Expect(dec.Decode(&rec)).To(Succeed())
		g.Expect(rec.ModelOutput.Type).To(Equal("message"))
		g.Expect(rec.ModelOutput.Usage).To(HaveKey("input_tokens"))
		n++
	}
	g.Expect(n).To(Equal(3))

	_, err = bc.StopModelInvocationJob(ctx, &bedrock.StopModelInvocationJobInput{JobIdentifier: aws.String(arn)})
	var invalid *btypes.ValidationException
	g.Expect(errors.As(err, &invalid)).To(BeTrue(), fmt.Sprint(err))
	_, err = bc.GetModelInvocationJob(ctx, &bedrock.GetModelInvocationJobInput{JobIdentifier: aws.String("abcdefghijkl")})
	var missing *btypes.ResourceNotFoundException
	g.Expect(errors.As(err, &missing)).To(BeTrue(), fmt.Sprint(err))
	_, err = sc.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("sdk-bucket"), Key: aws.String("nothing")})
	var noKey *s3types.NoSuchKey
	g.Expect(errors.As(err, &noKey)).To(BeTrue(), fmt.Sprint(err))

	bad := s3.New(s3.Options{Region: fakeupstream.BedrockRegion, BaseEndpoint: aws.String(f.URL), UsePathStyle: true, HTTPClient: httpClient,
		Credentials: credentials.NewStaticCredentialsProvider(fakeupstream.BedrockAccessKeyID, "wrong", ""), Retryer: aws.NopRetryer{}})
	_, err = bad.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("sdk-bucket"), Key: aws.String("in/input.jsonl")})
	g.Expect(err).To(MatchError(ContainSubstring("SignatureDoesNotMatch")))
}
