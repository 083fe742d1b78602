package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

var taskPhasesDesc = prometheus.NewDesc("modelgate_generation_tasks",
	"GenerationTask objects by phase (tasks in flight or recently finished).", []string{"phase"}, nil)

// taskPhases counts GenerationTasks by phase from the informer cache at
// scrape time: no bookkeeping on the hot path, and always consistent with
// the objects.
type taskPhases struct{ cache client.Reader }

func (c taskPhases) Describe(ch chan<- *prometheus.Desc) { ch <- taskPhasesDesc }

func (c taskPhases) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	list := &v1.GenerationTaskList{}
	if err := c.cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	counts := map[v1.TaskPhase]int{v1.TaskQueued: 0, v1.TaskInProgress: 0, v1.TaskCompleted: 0, v1.TaskFailed: 0}
	for i := range list.Items {
		phase := list.Items[i].Status.Phase
		if phase == "" {
			phase = v1.TaskQueued
		}
		counts[phase]++
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(taskPhasesDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
}

// RegisterTaskPhases exports the GenerationTask phase gauge read from cache.
func RegisterTaskPhases(cache client.Reader) {
	_ = ctrlmetrics.Registry.Register(taskPhases{cache})
}
