// Package builtin is the one list of compiled-in upstream adapters, used by the manager, the gateway and the ModelRoute controller's known-provider check.
package builtin

import (
	"slices"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/anthropic"
	"github.com/modelgate/modelgate/gateway/upstream/ark"
	"github.com/modelgate/modelgate/gateway/upstream/azureopenai"
	"github.com/modelgate/modelgate/gateway/upstream/bedrock"
	"github.com/modelgate/modelgate/gateway/upstream/bfl"
	"github.com/modelgate/modelgate/gateway/upstream/dashscope"
	"github.com/modelgate/modelgate/gateway/upstream/gemini"
	"github.com/modelgate/modelgate/gateway/upstream/openai"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
	"github.com/modelgate/modelgate/gateway/upstream/taskapi"
	"github.com/modelgate/modelgate/gateway/upstream/vertex"
)

// Registry returns the built-in adapters, sending through e: the
// composition root builds it once per process, since adapters hold
// per-backend state (the simulated provider's failure counters, cached
// upstream credentials) that every user in the process must share.
func Registry(e upstream.Egress) *upstream.Registry {
	return upstream.NewRegistry(
		upstream.Entry{Name: anthropic.Name, Adapter: anthropic.New(e.API)},
		upstream.Entry{Name: azureopenai.Name, Adapter: azureopenai.New(e.API)},
		upstream.Entry{Name: bedrock.Name, Adapter: bedrock.New(e.API)},
		upstream.Entry{Name: openai.Name, Adapter: openai.New(e.API)},
		upstream.Entry{Name: bfl.Name, Adapter: bfl.New(e.API)},
		upstream.Entry{Name: gemini.Name, Adapter: gemini.New(e.API, e.Downloads)},
		upstream.Entry{Name: simulated.Name, Adapter: simulated.Adapter{Provider: simulated.New(upstream.Messages)}},
		upstream.Entry{Name: simulated.NameOpenAI, Adapter: simulated.New(upstream.ChatCompletions, upstream.Responses)},
		upstream.Entry{Name: taskapi.Name, Adapter: taskapi.Adapter{Client: e.API}},
		upstream.Entry{Name: dashscope.Name, Adapter: dashscope.Adapter{Client: e.API}},
		upstream.Entry{Name: ark.Name, Adapter: ark.New(e.API)},
		upstream.Entry{Name: vertex.Name, Adapter: vertex.New(e.API)},
	)
}

// Names are the providers Registry has adapters for, without building any.
func Names() []string {
	return []string{anthropic.Name, azureopenai.Name, bedrock.Name, openai.Name, bfl.Name, gemini.Name,
		simulated.Name, simulated.NameOpenAI, taskapi.Name, dashscope.Name, ark.Name, vertex.Name}
}

// Known reports whether provider has a built-in adapter (the ModelRoute
// controller's check).
func Known(provider string) bool { return slices.Contains(Names(), provider) }
