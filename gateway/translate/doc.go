// Package translate converts text-generation requests, responses and SSE
// streams between the gateway's five wire protocols: the three that clients
// speak, messages (Anthropic Messages API), chat_completions and responses
// (OpenAI), and two that only upstreams speak, gemini (Google
// generateContent) and bedrock (Amazon Bedrock Converse).
//
// Each protocol's codec decodes into and encodes from one neutral form
// (ir.go), so a translation is a decoder composed with an encoder. Requests
// of a client protocol are read leniently (lenient.go): any JSON object of
// the protocol's shape translates, whatever new fields, roles, block, item
// or tool types it carries. The tools of every target are flat JSON-schema
// functions (tools.go): namespaced, freeform and oddly named client tools
// are renamed for the upstream, and the ToolMap that TranslateRequest
// returns lets TranslateResponse and the StreamTranslator give the
// upstream's calls back as calls of the client's tools.
//
// The same protocol on both sides is a pass-through: the body and every
// stream event keep their bytes, only the model is rewritten.
//
// docs/protocol-mapping.md has the field-by-field mapping.
package translate
