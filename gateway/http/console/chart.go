package console

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
)

// The usage chart: one stacked bar per hour or UTC day of the window, in
// the chosen metric, split by key or by model. Everything is laid out here
// and drawn by the template as SVG, so the page needs no script.

// metric is what the bars measure.
type metric string

const (
	metricCost     metric = "cost"
	metricRequests metric = "requests"
	metricTokens   metric = "tokens"
)

var metricLabels = map[metric]string{metricCost: "Cost (USD)", metricRequests: "Requests", metricTokens: "Tokens"}

// maxGroups is how many groups get their own colour; the rest are "Other".
const maxGroups = 5

// hourlyUpTo is the longest window charted per hour by default.
const hourlyUpTo = 2 * day

type chartOptions struct {
	Metric metric
	Split  store.SeriesSplit
	Bucket int64
}

// parseChartOptions reads metric, split and bucket; ok is false for an
// unknown value. Without a bucket, windows up to two days are hourly.
func parseChartOptions(q url.Values, window int64) (chartOptions, bool) {
	o := chartOptions{Metric: metric(cmp.Or(q.Get("metric"), string(metricCost))), Split: store.SeriesSplit(q.Get("split"))}
	if _, ok := metricLabels[o.Metric]; !ok {
		return o, false
	}
	if o.Split != store.SplitNone && o.Split != store.SplitKey && o.Split != store.SplitModel {
		return o, false
	}
	switch q.Get("bucket") {
	case "hour":
		o.Bucket = store.BucketHour
	case "day":
		o.Bucket = store.BucketDay
	case "":
		o.Bucket = store.BucketDay
		if window <= int64(hourlyUpTo/time.Second) {
			o.Bucket = store.BucketHour
		}
	default:
		return o, false
	}
	return o, true
}

func (o chartOptions) value(p store.SeriesPoint) int64 {
	switch o.Metric {
	case metricRequests:
		return p.RequestCount
	case metricTokens:
		return p.Tokens
	}
	return int64(p.Quota)
}

func (o chartOptions) format(v int64) string {
	if o.Metric == metricCost {
		return billing.Quota(v).CostUSD()
	}
	return strconv.FormatInt(v, 10)
}

// group is one key, one model, or everything, with its window totals.
type group struct {
	Name     string
	Class    string // s0 … s5, the colour
	Requests int64
	Tokens   int64
	Quota    billing.Quota
	Total    string // in the chart's metric
	value    int64
}

type segment struct {
	Y, H  float64
	Class string
	Title string
}

type bar struct {
	X, W     float64
	LabelX   float64
	Label    string
	Segments []segment
}

type chartData struct {
	// ID and TableID are the element IDs of the chart and its breakdown.
	ID, TableID              string
	Options                  chartOptions
	MetricLabel, BucketLabel string
	Groups                   []group
	Bars                     []bar
	W, H                     int
	AxisY, LabelsAt          float64
	Max                      string // the highest bar, in the metric
	Links                    []chartLink
}

type chartLink struct {
	Label, URL, Kind string
	Current          bool
}

// layoutChart turns a series into bars of stacked segments. keyNames names
// keys by ID (a key the cache no longer has is shown by its ID).
func layoutChart(o chartOptions, start, end int64, points []store.SeriesPoint, keyNames map[int64]string) chartData {
	const top, bottom, left, barGap = 12.0, 28.0, 8.0, 2.0
	d := chartData{ID: "usage-chart", TableID: "breakdown", Options: o, MetricLabel: metricLabels[o.Metric], W: 640, H: 200}
	d.BucketLabel = map[int64]string{store.BucketHour: "hour", store.BucketDay: "UTC day"}[o.Bucket]

	// Groups by their window total, largest first; past maxGroups, "Other".
	name := func(p store.SeriesPoint) string {
		switch o.Split {
		case store.SplitKey:
			if n, ok := keyNames[p.TokenID]; ok {
				return n + " #" + strconv.FormatInt(p.TokenID, 10)
			}
			return "#" + strconv.FormatInt(p.TokenID, 10)
		case store.SplitModel:
			return p.Model
		}
		return "All usage"
	}
	totals := map[string]*group{}
	for _, p := range points {
		g := totals[name(p)]
		if g == nil {
			g = &group{Name: name(p)}
			totals[g.Name] = g
		}
		g.Requests += p.RequestCount
		g.Tokens += p.Tokens
		g.Quota += p.Quota
		g.value += o.value(p)
	}
	ordered := make([]*group, 0, len(totals))
	for _, g := range totals {
		ordered = append(ordered, g)
	}
	slices.SortFunc(ordered, func(a, b *group) int { return cmp.Or(cmp.Compare(b.value, a.value), cmp.Compare(a.Name, b.Name)) })
	class := map[string]string{}
	for i, g := range ordered {
		if i >= maxGroups && len(ordered) > maxGroups+1 {
			other := &group{Name: "Other", Class: "s" + strconv.Itoa(maxGroups)}
			for _, rest := range ordered[maxGroups:] {
				class[rest.Name] = other.Class
				other.Requests += rest.Requests
				other.Tokens += rest.Tokens
				other.Quota += rest.Quota
				other.value += rest.value
			}
			ordered = append(ordered[:maxGroups], other)
			break
		}
		g.Class = "s" + strconv.Itoa(i)
		class[g.Name] = g.Class
	}
	for _, g := range ordered {
		g.Total = o.format(g.value)
		d.Groups = append(d.Groups, *g)
	}

	// Stacks per bucket, in the groups' order.
	first := start - start%o.Bucket
	n := max(int((end-first+o.Bucket-1)/o.Bucket), 1)
	stacks := make([]map[string]int64, n)
	for _, p := range points {
		i := int((p.Bucket - first) / o.Bucket)
		if i < 0 || i >= n {
			continue
		}
		if stacks[i] == nil {
			stacks[i] = map[string]int64{}
		}
		stacks[i][class[name(p)]] += o.value(p)
	}
	var most int64
	for _, s := range stacks {
		var sum int64
		for _, v := range s {
			sum += v
		}
		most = max(most, sum)
	}
	d.Max = o.format(most)
	slot := (float64(d.W) - 2*left) / float64(n)
	plot := float64(d.H) - top - bottom
	d.AxisY, d.LabelsAt = top+plot, float64(d.H)-8
	every := max(1, n/8) // at most about 8 labels
	for i := range n {
		at := time.Unix(first+int64(i)*o.Bucket, 0).UTC()
		b := bar{X: left + float64(i)*slot + barGap/2, W: max(slot-barGap, 1)}
		b.LabelX = b.X + b.W/2
		if i%every == 0 {
			b.Label = at.Format("01-02")
			if o.Bucket == store.BucketHour {
				b.Label = at.Format("15:04")
			}
		}
		y := top + plot
		for _, g := range d.Groups {
			v := stacks[i][g.Class]
			if v == 0 || most == 0 {
				continue
			}
			h := max(plot*float64(v)/float64(most), 1)
			y -= h
			b.Segments = append(b.Segments, segment{Y: y, H: h, Class: g.Class,
				Title: bucketTitle(at, o.Bucket) + " · " + g.Name + ": " + o.format(v)})
		}
		d.Bars = append(d.Bars, b)
	}
	return d
}

func bucketTitle(at time.Time, bucket int64) string {
	if bucket == store.BucketHour {
		return at.Format("2006-01-02 15:04") + " UTC"
	}
	return at.Format("2006-01-02")
}

// chartLinks are the metric, split and bucket choices, each keeping the
// rest of the query (window, key filter, page size).
func chartLinks(base url.Values, o chartOptions) []chartLink {
	var links []chartLink
	add := func(kind, param, value, label string, current bool) {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		v.Set(param, value)
		if value == "" {
			v.Del(param)
		}
		links = append(links, chartLink{Kind: kind, Label: label, URL: Prefix + "usage?" + v.Encode(), Current: current})
	}
	for _, m := range []metric{metricCost, metricRequests, metricTokens} {
		add("metric", "metric", string(m), metricLabels[m], o.Metric == m)
	}
	for _, s := range []struct {
		split store.SeriesSplit
		label string
	}{{store.SplitNone, "All"}, {store.SplitKey, "By key"}, {store.SplitModel, "By model"}} {
		add("split", "split", string(s.split), s.label, o.Split == s.split)
	}
	add("bucket", "bucket", "hour", "Per hour", o.Bucket == store.BucketHour)
	add("bucket", "bucket", "day", "Per day", o.Bucket == store.BucketDay)
	return links
}
