package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// PublishSimulatedImage publishes an image model on the simulated backend
// in the system namespace, priced per request at unitPrice USD, and waits
// until this stack's gateway serves it. remove deletes the route and price.
func (s *Stack) PublishSimulatedImage(ctx context.Context, model, unitPrice string) (remove func(), err error) {
	route := &v1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: SystemNamespace},
		Spec: v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeImage, ValidationProfile: v1.ProfileMultiImage,
			Backends: []v1.Backend{{Name: "sim", Provider: "simulated", Weight: 1, Groups: []v1.GroupName{"default"}}}}}
	price := &v1.PriceRule{ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: SystemNamespace},
		Spec: v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerRequest, PriceBasis: v1.BasisRequest,
			Unit: v1.UnitRequest, UnitPrice: v1.Decimal(unitPrice)}}
	var made []client.Object
	remove = func() {
		for _, o := range made {
			_ = s.Client.Delete(context.Background(), o)
		}
	}
	for _, o := range []client.Object{route, price} {
		if err := s.Client.Create(ctx, o); err != nil {
			remove()
			return nil, err
		}
		made = append(made, o)
		if err := s.WaitReady(ctx, o); err != nil {
			remove()
			return nil, err
		}
		if err := s.WaitCached(ctx, o); err != nil {
			remove()
			return nil, err
		}
	}
	return remove, nil
}

// CompletedImageTask submits an image generation with key and waits until
// the task API shows it completed and settled; it returns that answer.
func (s *Stack) CompletedImageTask(ctx context.Context, key, model, prompt string) (map[string]any, error) {
	body, _ := json.Marshal(map[string]string{"model": model, "prompt": prompt})
	sub, err := s.callJSON(ctx, key, http.MethodPost, "/v1/images/generations", string(body))
	if err != nil {
		return nil, err
	}
	id, _ := sub["id"].(string)
	for deadline := time.Now().Add(Timeout); ; time.Sleep(100 * time.Millisecond) {
		task, err := s.callJSON(ctx, key, http.MethodGet, "/v1/images/generations/"+id, "")
		if err != nil {
			return nil, err
		}
		if b, _ := task["billing"].(map[string]any); task["status"] == "completed" && b["status"] == "settled" {
			return task, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("task %s did not complete and settle: %v", id, task)
		}
	}
}

// CallJSON sends an API request with key and decodes a 200 answer.
func (s *Stack) CallJSON(ctx context.Context, key, method, path, body string) (map[string]any, error) {
	return s.callJSON(ctx, key, method, path, body)
}

func (s *Stack) callJSON(ctx context.Context, key, method, path, body string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.BaseURL+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	var out map[string]any
	return out, json.Unmarshal(raw, &out)
}
