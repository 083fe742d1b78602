// Package builtin is the one list of compiled-in upstream adapters, used by the manager, the gateway and the ModelRoute controller's known-provider check.
package builtin

import (
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

// registry is built once, at package initialisation: adapters share the
// upstream client and hold per-backend state (the simulated provider's
// failure counters), so every user must see the same instances.
var registry = upstream.NewRegistry(
	upstream.Entry{Name: anthropic.Name, Adapter: anthropic.New(nil)},
	upstream.Entry{Name: azureopenai.Name, Adapter: azureopenai.New(nil)},
	upstream.Entry{Name: bedrock.Name, Adapter: bedrock.New(nil)},
	upstream.Entry{Name: openai.Name, Adapter: openai.New(nil)},
	upstream.Entry{Name: bfl.Name, Adapter: bfl.New()},
	upstream.Entry{Name: gemini.Name, Adapter: gemini.New(nil)},
	upstream.Entry{Name: simulated.Name, Adapter: simulated.Adapter{Provider: simulated.New(upstream.Messages)}},
	upstream.Entry{Name: simulated.NameOpenAI, Adapter: simulated.New(upstream.ChatCompletions, upstream.Responses)},
	upstream.Entry{Name: taskapi.Name, Adapter: taskapi.Adapter{}},
	upstream.Entry{Name: dashscope.Name, Adapter: dashscope.Adapter{}},
	upstream.Entry{Name: ark.Name, Adapter: ark.New()},
	upstream.Entry{Name: vertex.Name, Adapter: vertex.New(nil)},
)

// Registry returns the built-in adapters.
func Registry() *upstream.Registry { return registry }
