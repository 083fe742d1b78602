// Package media validates and normalizes the request bodies of the
// asynchronous image and video generation endpoints
// (POST /v1/images/generations and POST /v1/videos/generations).
//
// The rules of a request are chosen by the validation profile of the model's
// ModelRoute (v1alpha1.ValidationProfile), never by the model ID: model names
// are configuration. Validate is pure: it performs no I/O except through the
// optional ImageProbe injected in Options, which the multi-image family uses
// to check its reference images. HTTPImageProbe is a real prober.
//
// A successful validation returns a Normalized request: the request with
// defaults applied and unknown fields dropped (to be stored in a
// GenerationTask), plus the facts billing and the task controller need.
// A failed validation returns a ValidationError in the image task error
// table's terms (HTTP 400, type invalid_request).
//
// The rules, defaults and messages of every family are documented in
// docs/media-families.md.
package media
