package tasks

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/store"
)

// BlobScheme prefixes a result URL that names a blob-store key rather than a
// public URL; the gateway signs a fresh URL for it on every query.
const BlobScheme = "blob:"

// Submission is the gateway's decision at submission time
// (spec.submission).
type Submission = v1.TaskSubmission

// ReviewAsset is one asset under private asset review.
type ReviewAsset = v1.SubmittedAsset

// SubmissionOf returns the task's submission (spec.submission), which the
// gateway sets on every task it creates.
func SubmissionOf(t *v1.GenerationTask) (*Submission, error) {
	if t.Spec.Submission == nil {
		return nil, fmt.Errorf("task %s has no submission", t.Spec.TaskID)
	}
	return t.Spec.Submission, nil
}

// NewTaskID returns a random task ID ("task_" and 24 hex digits).
func NewTaskID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "task_" + hex.EncodeToString(b[:])
}

// IsTaskID reports whether id has the shape of a task ID ("task_" and 24
// lower-case hex digits), as NewTaskID and BusinessTaskID make them.
func IsTaskID(id string) bool {
	hexPart, ok := strings.CutPrefix(id, "task_")
	if !ok || len(hexPart) != 24 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil && strings.ToLower(hexPart) == hexPart
}

// BusinessTaskID is the task ID of a submission carrying a client business
// ID: derived from the tenant namespace, the family (image or video) and that
// ID, so concurrent repeats of one submission collide on the object name
// instead of making two tasks.
func BusinessTaskID(namespace string, kind v1.ModelType, clientBusinessID string) string {
	sum := sha256.Sum256([]byte(namespace + "\x00" + string(kind) + "\x00" + clientBusinessID))
	return "task_" + hex.EncodeToString(sum[:12])
}

// ObjectName is the GenerationTask name of a task ID (lower case, DNS-safe).
func ObjectName(taskID string) string {
	return strings.ReplaceAll(strings.ToLower(taskID), "_", "-")
}

// BlobKey is where output i of a task is stored: under the tenant's prefix.
func BlobKey(namespace, taskID string, i int, ext string) string {
	return fmt.Sprintf("tenants/%s/tasks/%s/%d.%s", namespace, taskID, i, ext)
}

// Final reports whether the phase is final.
func Final(p v1.TaskPhase) bool { return p == v1.TaskCompleted || p == v1.TaskFailed }

// archived is the archive body: the task without its request body.
type archived struct {
	Namespace string                  `json:"namespace"`
	Name      string                  `json:"name"`
	Created   int64                   `json:"created"`
	Spec      v1.GenerationTaskSpec   `json:"spec"`
	Status    v1.GenerationTaskStatus `json:"status"`
}

// Record is the ledger archive row of t.
func Record(t *v1.GenerationTask) (store.TaskRecord, error) {
	a := archived{Namespace: t.Namespace, Name: t.Name, Created: t.CreationTimestamp.Unix(), Spec: t.Spec, Status: t.Status}
	a.Spec.Request.Raw, a.Spec.Request.Object = nil, nil
	a.Status.Conditions = nil
	body, err := json.Marshal(a)
	if err != nil {
		return store.TaskRecord{}, err
	}
	rec := store.TaskRecord{
		TaskID: t.Spec.TaskID, UserID: t.Spec.UserID, TokenID: t.Spec.TokenID, RequestID: t.Spec.RequestID,
		Kind: string(t.Spec.Type), Model: string(t.Spec.Model), Status: string(phase(t)),
		ClientBusinessID: t.Spec.ClientBusinessID, Body: body, CreatedAt: a.Created,
	}
	if b := t.Status.Billing; b != nil {
		rec.BillingStatus = string(b.Status)
		if b.Quota != nil {
			rec.Quota = *b.Quota
		}
	}
	if Final(t.Status.Phase) {
		switch {
		case t.Status.CompletedAt != nil:
			rec.CompletedAt = t.Status.CompletedAt.Unix()
		default:
			rec.CompletedAt = a.Created
		}
	}
	return rec, nil
}

// FromRecord rebuilds the task an archive row describes (without its request).
func FromRecord(rec *store.TaskRecord) (*v1.GenerationTask, error) {
	var a archived
	if err := json.Unmarshal(rec.Body, &a); err != nil {
		return nil, fmt.Errorf("archived task %s: %w", rec.TaskID, err)
	}
	t := &v1.GenerationTask{Spec: a.Spec, Status: a.Status}
	t.Namespace, t.Name = a.Namespace, a.Name
	t.CreationTimestamp = metav1.Unix(a.Created, 0)
	return t, nil
}

func phase(t *v1.GenerationTask) v1.TaskPhase {
	if t.Status.Phase == "" {
		return v1.TaskQueued
	}
	return t.Status.Phase
}
