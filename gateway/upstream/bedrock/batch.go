package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// The backend options of batch inference (CreateModelInvocationJob).
const (
	// OptionBatchRoleArn is the service role Bedrock assumes to read a
	// job's input from S3 and write its output there.
	OptionBatchRoleArn = "batchRoleArn"
	// OptionBatchS3URI is the S3 location (s3://bucket/prefix) the gateway
	// writes a job's input under and Bedrock writes its output under.
	OptionBatchS3URI = "batchS3URI"
	// OptionBatchMinRecords is the least number of records a job may have
	// (Bedrock's per-model quota); empty: DefaultBatchMinRecords. A
	// smaller batch runs through the gateway.
	OptionBatchMinRecords = "batchMinRecords"
	// OptionBatch "gateway" runs a batch's lines through the gateway even
	// when the backend could submit them as a batch inference job.
	OptionBatch = "batch"
	// OptionControlPlaneURL is the root of Bedrock's control plane (the
	// model-invocation-job API); empty: https://bedrock.{region}.amazonaws.com,
	// or the base URL when it is not an amazonaws.com host (a proxy or a
	// test's fake serving both planes).
	OptionControlPlaneURL = "controlPlaneURL"
	// OptionS3Endpoint is the S3 endpoint, addressed path-style; empty:
	// the region's own (virtual-hosted), or the base URL as for
	// OptionControlPlaneURL.
	OptionS3Endpoint = "s3Endpoint"
)

// BatchGateway is the OptionBatch value that keeps batches in the gateway.
const BatchGateway = "gateway"

// DefaultBatchMinRecords is the minimum record count of a batch inference
// job in most regions ("Minimum number of records per batch inference
// job").
const DefaultBatchMinRecords = 100

// AnthropicVersion is the anthropic_version of a Claude InvokeModel body.
const AnthropicVersion = "bedrock-2023-05-31"

// The job statuses (ModelInvocationJobStatus) the provider acts on.
const (
	jobStopped = "Stopped"
	jobFailed  = "Failed"
)

// jobARN is a batch inference job's ARN, the batch's upstream ID; it
// becomes a URL path label, so nothing else is accepted.
var jobARN = regexp.MustCompile(`^arn:aws[a-z-]*:bedrock:[a-z0-9-]+:[0-9]{12}:model-invocation-job/([a-z0-9]+)$`)

// bucketName is an S3 bucket name (general purpose buckets).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// BatchProtocol implements upstream.BatchProvider: a Claude model on
// Bedrock batches in the Messages protocol (its InvokeModel body is an
// Anthropic Messages body) when the backend names a service role and an S3
// location and does not keep batches in the gateway. Other models run
// their lines through the gateway: the gateway builds only Converse bodies
// for them, which batch inference does not take for every model.
func (p *Provider) BatchProtocol(b upstream.Backend, _ upstream.Protocol) (upstream.Protocol, bool) {
	if b.Options[OptionBatch] == BatchGateway || !strings.Contains(b.UpstreamModel, "anthropic.") {
		return "", false
	}
	if strings.TrimSpace(b.Options[OptionBatchRoleArn]) == "" {
		return "", false
	}
	if _, _, err := s3URI(b.Options[OptionBatchS3URI]); err != nil {
		return "", false
	}
	return upstream.Messages, true
}

// SubmitBatch implements upstream.BatchProvider: it writes the lines as one
// JSONL object, {"recordId": custom ID, "modelInput": Claude's InvokeModel
// body} a line, under the backend's batchS3URI and creates a batch
// inference job that reads it and writes its output beside it. The job's
// ARN is the ID. A batch below the job's minimum record count, or with a
// line that declares tools (batch inference does not call tools), is not
// sent: the error wraps upstream.ErrNoBatchAPI, so its lines run through
// the gateway.
//
// The job's name, client request token and S3 keys derive from the model
// and the custom IDs: a submission repeated after a crash writes the same
// object and Bedrock answers the same job for the same token.
func (p *Provider) SubmitBatch(ctx context.Context, b upstream.Backend, up upstream.Protocol, lines []upstream.BatchLine) (string, error) {
	if up != upstream.Messages {
		return "", batchUnsupported(b, "batch inference takes Messages requests, not %s", up)
	}
	bucket, prefix, err := s3URI(b.Options[OptionBatchS3URI])
	if err != nil {
		return "", batchUnsupported(b, "%s: %v", OptionBatchS3URI, err)
	}
	if n := minRecords(b); len(lines) < n {
		return "", fmt.Errorf("backend %q (bedrock): a batch inference job takes at least %d records, the batch has %d: %w",
			b.Name, n, len(lines), upstream.ErrNoBatchAPI)
	}
	for _, l := range lines {
		if usesTools(l.Body) {
			return "", fmt.Errorf("backend %q (bedrock): line %s declares tools, which batch inference does not support: %w",
				b.Name, l.CustomID, upstream.ErrNoBatchAPI)
		}
	}
	sum := sha256.New()
	sum.Write([]byte(b.UpstreamModel))
	var in bytes.Buffer
	for _, l := range lines {
		rec, err := inputRecord(l)
		if err != nil {
			return "", err
		}
		in.Write(rec)
		in.WriteByte('\n')
		sum.Write([]byte{0})
		sum.Write([]byte(l.CustomID))
	}
	name := "modelgate-" + hex.EncodeToString(sum.Sum(nil)[:12])
	dir := path.Join(prefix, name)
	if prefix == "" {
		dir = name
	}
	key := dir + "/input.jsonl"

	region, creds, err := p.batchCredentials(ctx, b)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, b.TimeoutOr(upstream.DefaultTimeout))
	defer cancel()
	_, err = p.s3(b, region, creds).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader(in.Bytes()), ContentType: aws.String("application/jsonl")})
	if err != nil {
		return "", s3Error(b, "write s3://"+bucket+"/"+key, err)
	}
	job := map[string]any{
		"jobName":            name,
		"modelId":            b.UpstreamModel,
		"roleArn":            strings.TrimSpace(b.Options[OptionBatchRoleArn]),
		"clientRequestToken": name,
		"inputDataConfig": map[string]any{"s3InputDataConfig": map[string]any{
			"s3Uri": "s3://" + bucket + "/" + key, "s3InputFormat": "JSONL"}},
		"outputDataConfig": map[string]any{"s3OutputDataConfig": map[string]any{
			"s3Uri": "s3://" + bucket + "/" + dir + "/"}},
	}
	body, _ := json.Marshal(job)
	x, err := p.control(ctx, b, region, creds, http.MethodPost, "/model-invocation-job", body, true)
	if err != nil {
		return "", err
	}
	var created struct {
		JobArn string `json:"jobArn"`
	}
	if err := json.Unmarshal(x, &created); err != nil || !jobARN.MatchString(created.JobArn) {
		return "", &upstream.Error{Class: upstream.Permanent, Status: http.StatusBadGateway,
			Message: fmt.Sprintf("backend %q (bedrock): the batch inference job created has no usable ARN", b.Name), Err: err}
	}
	return created.JobArn, nil
}

// usesTools reports whether a Messages body declares tools or a tool
// choice: batch inference does not take tool calling, so such a batch runs
// through the gateway, where it does.
func usesTools(body []byte) bool {
	var m struct {
		Tools      json.RawMessage `json:"tools"`
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	set := func(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" && string(r) != "[]" }
	return set(m.Tools) || set(m.ToolChoice)
}

// inputRecord is a record of the job's input: the custom ID as recordId
// and as modelInput the line's Messages body as InvokeModel takes it for
// Claude (no model, no stream, the Bedrock anthropic_version).
func inputRecord(l upstream.BatchLine) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(l.Body, &m); err != nil || m == nil {
		return nil, upstream.RequestError(fmt.Errorf("line %s: the request is not a JSON object", l.CustomID))
	}
	delete(m, "model")
	delete(m, "stream")
	m["anthropic_version"] = json.RawMessage(strconv.Quote(AnthropicVersion))
	return json.Marshal(map[string]any{"recordId": l.CustomID, "modelInput": m})
}

// job is the part of GetModelInvocationJob's answer the provider reads.
type job struct {
	JobArn          string `json:"jobArn"`
	Status          string `json:"status"`
	Message         string `json:"message"`
	InputDataConfig struct {
		S3InputDataConfig struct {
			S3URI string `json:"s3Uri"`
		} `json:"s3InputDataConfig"`
	} `json:"inputDataConfig"`
	OutputDataConfig struct {
		S3OutputDataConfig struct {
			S3URI string `json:"s3Uri"`
		} `json:"s3OutputDataConfig"`
	} `json:"outputDataConfig"`
}

// jobState maps a job status to the batch's: failed, ended (its output can
// be read) or, for every status on the way (Submitted, Validating,
// Scheduled, InProgress, Stopping), running.
func jobState(s string) upstream.BatchJobState {
	switch s {
	case "Completed", "PartiallyCompleted", jobStopped, "Expired":
		return upstream.BatchJobEnded
	case jobFailed:
		return upstream.BatchJobFailed
	}
	return upstream.BatchJobRunning
}

// BatchStatus implements upstream.BatchProvider with GetModelInvocationJob.
func (p *Provider) BatchStatus(ctx context.Context, b upstream.Backend, id string) (upstream.BatchJob, error) {
	j, err := p.getJob(ctx, b, id)
	if err != nil {
		return upstream.BatchJob{}, err
	}
	out := upstream.BatchJob{State: jobState(j.Status)}
	if out.State == upstream.BatchJobFailed {
		out.Message = "the batch inference job failed"
		if j.Message != "" {
			out.Message = j.Message
		}
	}
	return out, nil
}

// CancelBatch implements upstream.BatchProvider with
// StopModelInvocationJob. Bedrock refuses to stop a job that has ended
// (ValidationException, ConflictException); that is no error here.
func (p *Provider) CancelBatch(ctx context.Context, b upstream.Backend, id string) error {
	if !jobARN.MatchString(id) {
		return notJob(b, id)
	}
	region, creds, err := p.batchCredentials(ctx, b)
	if err != nil {
		return err
	}
	_, err = p.control(ctx, b, region, creds, http.MethodPost, "/model-invocation-job/"+escapeLabel(id)+"/stop", nil, false)
	if ue, ok := upstream.As(err); ok && (ue.Status == http.StatusBadRequest || ue.Status == http.StatusConflict) {
		if j, gerr := p.getJob(ctx, b, id); gerr == nil && jobState(j.Status) != upstream.BatchJobRunning {
			return nil
		}
	}
	return err
}

// BatchResults implements upstream.BatchProvider: it reads the job's output
// object, {outputS3Uri}/{job ID}/{input file name}.out, a line
// {"recordId", "modelInput", "modelOutput"} a Claude answer (200 with the
// Messages response) or {"recordId", "modelInput", "error": {"errorCode",
// "errorMessage"}} a failed record (its status, with a Messages error
// body). A job that ended before writing output has none. After a stop,
// the input's records the output lacks are NotRun "cancelled".
func (p *Provider) BatchResults(ctx context.Context, b upstream.Backend, id string, each func(upstream.BatchAnswer) error) error {
	j, err := p.getJob(ctx, b, id)
	if err != nil {
		return err
	}
	if jobState(j.Status) != upstream.BatchJobEnded {
		return nil
	}
	region, creds, err := p.batchCredentials(ctx, b)
	if err != nil {
		return err
	}
	client := p.s3(b, region, creds)
	inBucket, inKey, err := s3URI(j.InputDataConfig.S3InputDataConfig.S3URI)
	if err != nil {
		return fmt.Errorf("backend %q (bedrock): the job's input: %w", b.Name, err)
	}
	outBucket, outPrefix, err := s3URI(j.OutputDataConfig.S3OutputDataConfig.S3URI)
	if err != nil {
		return fmt.Errorf("backend %q (bedrock): the job's output location: %w", b.Name, err)
	}
	jobID := jobARN.FindStringSubmatch(id)[1]
	outKey := path.Join(outPrefix, jobID, path.Base(inKey)+".out")
	seen := map[string]bool{}
	err = readLines(ctx, b, client, outBucket, outKey, func(raw json.RawMessage) error {
		a, ok := answer(raw)
		if !ok || seen[a.CustomID] {
			return nil
		}
		seen[a.CustomID] = true
		return each(a)
	})
	if err != nil {
		return err
	}
	if j.Status != jobStopped {
		return nil
	}
	return readLines(ctx, b, client, inBucket, inKey, func(raw json.RawMessage) error {
		var rec struct {
			RecordID string `json:"recordId"`
		}
		if json.Unmarshal(raw, &rec) != nil || rec.RecordID == "" || seen[rec.RecordID] {
			return nil
		}
		seen[rec.RecordID] = true
		return each(upstream.BatchAnswer{CustomID: rec.RecordID, NotRun: upstream.NotRunCancelled})
	})
}

// answer reads an output record: a modelOutput is the line's 200 answer;
// an error object its failure, with errorCode as the status (500 when it
// is not an HTTP error status) and errorMessage in a Messages error body.
func answer(raw json.RawMessage) (upstream.BatchAnswer, bool) {
	var rec struct {
		RecordID    string          `json:"recordId"`
		ModelOutput json.RawMessage `json:"modelOutput"`
		Error       *struct {
			ErrorCode    json.RawMessage `json:"errorCode"`
			ErrorMessage string          `json:"errorMessage"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &rec) != nil || rec.RecordID == "" {
		return upstream.BatchAnswer{}, false
	}
	a := upstream.BatchAnswer{CustomID: rec.RecordID}
	if rec.Error == nil && len(rec.ModelOutput) > 0 && string(rec.ModelOutput) != "null" {
		a.Status, a.Body = http.StatusOK, rec.ModelOutput
		return a, true
	}
	a.Status = http.StatusInternalServerError
	msg := "the batch inference job gave no answer for the record"
	if rec.Error != nil {
		code, _ := strconv.Unquote(string(rec.Error.ErrorCode))
		if code == "" {
			code = string(rec.Error.ErrorCode)
		}
		if n, err := strconv.Atoi(code); err == nil && n >= 400 && n <= 599 {
			a.Status = n
		}
		if rec.Error.ErrorMessage != "" {
			msg = rec.Error.ErrorMessage
		}
	}
	a.Body = upstream.ErrorBody(upstream.Messages, a.Status, msg)
	return a, true
}

// getJob reads batch inference job id.
func (p *Provider) getJob(ctx context.Context, b upstream.Backend, id string) (*job, error) {
	if !jobARN.MatchString(id) {
		return nil, notJob(b, id)
	}
	region, creds, err := p.batchCredentials(ctx, b)
	if err != nil {
		return nil, err
	}
	x, err := p.control(ctx, b, region, creds, http.MethodGet, "/model-invocation-job/"+escapeLabel(id), nil, false)
	if err != nil {
		return nil, err
	}
	var j job
	if err := json.Unmarshal(x, &j); err != nil {
		return nil, &upstream.Error{Class: upstream.Transient, Retryable: true,
			Message: fmt.Sprintf("backend %q (bedrock): the batch inference job is unreadable", b.Name), Err: err}
	}
	return &j, nil
}

// readLines downloads an S3 object and calls f with each JSON value of it,
// without holding the object in memory; an object that does not exist has
// none.
func readLines(ctx context.Context, b upstream.Backend, client *s3.Client, bucket, key string, f func(json.RawMessage) error) error {
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var missing *s3types.NoSuchKey
	if errors.As(err, &missing) {
		return nil
	}
	if err != nil {
		return s3Error(b, "read s3://"+bucket+"/"+key, err)
	}
	defer out.Body.Close()
	dec := json.NewDecoder(out.Body)
	for {
		var raw json.RawMessage
		switch err := dec.Decode(&raw); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return &upstream.Error{Class: upstream.Transient, Retryable: true,
				Message: fmt.Sprintf("backend %q (bedrock): s3://%s/%s is not JSON lines", b.Name, bucket, key), Err: err}
		}
		if err := f(raw); err != nil {
			return err
		}
	}
}

// batchCredentials are the region and credentials of backend b's batch
// calls, those of its runtime calls.
func (p *Provider) batchCredentials(ctx context.Context, b upstream.Backend) (string, aws.Credentials, error) {
	region, err := Region(b)
	if err != nil {
		return "", aws.Credentials{}, err
	}
	creds, err := p.credentials(ctx, b, region)
	return region, creds, err
}

// control sends one signed request to Bedrock's control plane and reads its
// 2xx answer; any other is an *upstream.Error (on submission a 404, 405 or
// 501 wraps upstream.ErrNoBatchAPI).
func (p *Provider) control(ctx context.Context, b upstream.Backend, region string, creds aws.Credentials, method, route string, body []byte, submit bool) ([]byte, error) {
	base, err := controlPlaneURL(b, region)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.TimeoutOr(upstream.DefaultTimeout))
	defer cancel()
	u, err := url.Parse(base)
	if err != nil {
		return nil, batchUnsupported(b, "%s: %v", OptionControlPlaneURL, err)
	}
	// The path signed is the path sent: RawPath keeps the escaped ARN.
	basePath := strings.TrimRight(u.EscapedPath(), "/")
	u.RawPath = basePath + route
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, batchUnsupported(b, "%s: %v", OptionControlPlaneURL, err)
	}
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, batchUnsupported(b, "invalid control plane URL: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	sum := sha256.Sum256(body)
	// A signer per request, as for the runtime (see post).
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), SigningName, region, p.now().UTC()); err != nil {
		return nil, &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "signing the bedrock request failed", Err: err}
	}
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return nil, &upstream.Error{Class: upstream.Transient, Retryable: true,
			Message: fmt.Sprintf("backend %q (bedrock): the control plane could not be reached", b.Name), Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		classify(resp)
		x, _ := io.ReadAll(resp.Body)
		e := upstream.StatusError(&upstream.Exchange{Status: resp.StatusCode, Header: resp.Header, Body: x}, submit, p.now())
		e.Message = fmt.Sprintf("backend %q (bedrock): %s", b.Name, e.Message)
		if submit && upstream.NoBatchAPIStatus(resp.StatusCode) {
			e.Err = upstream.ErrNoBatchAPI
		}
		return nil, e
	}
	x, err := io.ReadAll(io.LimitReader(resp.Body, upstream.MaxBody))
	if err != nil {
		return nil, &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the upstream's answer was cut off", Err: err}
	}
	return x, nil
}

// s3 is an S3 client for backend b with the credentials of its runtime
// calls, sending through the provider's HTTP client. A checksum is computed
// only where S3 requires one, so that an upload is one signed PUT.
func (p *Provider) s3(b upstream.Backend, region string, creds aws.Credentials) *s3.Client {
	o := s3.Options{
		Region:                     region,
		Credentials:                aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
		HTTPClient:                 p.client,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if ep := s3Endpoint(b); ep != "" {
		o.BaseEndpoint, o.UsePathStyle = aws.String(ep), true
	}
	return s3.New(o)
}

// s3Error classifies a failed S3 call: 408, 429, 5xx and a network failure
// are worth retrying, others are not.
func s3Error(b upstream.Backend, what string, err error) error {
	e := &upstream.Error{Class: upstream.Transient, Retryable: true, Err: err,
		Message: fmt.Sprintf("backend %q (bedrock): %s failed", b.Name, what)}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		e.Status = re.HTTPStatusCode()
		if !upstream.RetryableStatus(e.Status) {
			e.Class, e.Retryable = upstream.Permanent, false
		}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		e.Code = ae.ErrorCode()
		e.Message += ": " + ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return e
}

// controlPlaneURL is the root of backend b's control plane.
func controlPlaneURL(b upstream.Backend, region string) (string, error) {
	if u := strings.TrimSpace(b.Options[OptionControlPlaneURL]); u != "" {
		return checkURL(b, OptionControlPlaneURL, u)
	}
	if base, ok := nonAWSBase(b); ok {
		return base, nil
	}
	return "https://bedrock." + region + ".amazonaws.com", nil
}

// s3Endpoint is backend b's S3 endpoint override ("": the region's own).
func s3Endpoint(b upstream.Backend) string {
	if u := strings.TrimSpace(b.Options[OptionS3Endpoint]); u != "" {
		return strings.TrimRight(u, "/")
	}
	base, _ := nonAWSBase(b)
	return base
}

// nonAWSBase is b's base URL (scheme and host) when it names a server
// outside amazonaws.com: a proxy or fake that serves Bedrock's runtime, its
// control plane and S3 alike.
func nonAWSBase(b upstream.Backend) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(b.BaseURL))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	if h := u.Hostname(); h == "amazonaws.com" || strings.HasSuffix(h, ".amazonaws.com") || strings.HasSuffix(h, ".amazonaws.com.cn") {
		return "", false
	}
	return u.Scheme + "://" + u.Host, true
}

func checkURL(b upstream.Backend, option, s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", batchUnsupported(b, "%s %q is not an http(s) URL", option, s)
	}
	return strings.TrimRight(s, "/"), nil
}

// minRecords is backend b's minimum record count of a job.
func minRecords(b upstream.Backend) int {
	if n, err := strconv.Atoi(strings.TrimSpace(b.Options[OptionBatchMinRecords])); err == nil && n > 0 {
		return n
	}
	return DefaultBatchMinRecords
}

// s3URI splits s3://bucket/key into the bucket and the key without
// leading or trailing slashes.
func s3URI(s string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an s3:// URI", s)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if !bucketName.MatchString(bucket) {
		return "", "", fmt.Errorf("%q does not name an S3 bucket", s)
	}
	return bucket, strings.Trim(key, "/"), nil
}

func notJob(b upstream.Backend, id string) error {
	return &upstream.Error{Class: upstream.Permanent, Status: http.StatusBadRequest,
		Message: fmt.Sprintf("backend %q (bedrock): %q is not a batch inference job ARN", b.Name, id)}
}

// batchUnsupported is a configuration problem of backend b's batches.
func batchUnsupported(b upstream.Backend, format string, args ...any) *upstream.Error {
	e := upstream.Unsupported("backend %q (bedrock): %s", b.Name, fmt.Sprintf(format, args...))
	e.Status = http.StatusBadGateway
	return e
}

var _ upstream.BatchProvider = (*Provider)(nil)
