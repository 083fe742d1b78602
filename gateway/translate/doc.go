// Package translate converts text-generation requests, responses and SSE
// streams between the gateway's three wire protocols: messages (Anthropic
// Messages API), chat_completions and responses (OpenAI).
package translate
