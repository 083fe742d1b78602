package translate

// Real-looking requests, responses and streams of each protocol.

const fixtureMessagesRequest = `{
  "model": "claude-x",
  "max_tokens": 1024,
  "system": [{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],
  "temperature": 0.5,
  "top_p": 0.9,
  "stop_sequences": ["END"],
  "tools": [{"name":"get_weather","description":"Weather for a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
  "tool_choice": {"type":"auto"},
  "messages": [
    {"role":"user","content":[
      {"type":"text","text":"What is in this image, and the weather in Paris?"},
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
      {"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}
    ]},
    {"role":"assistant","content":[
      {"type":"text","text":"A cat. Checking the weather."},
      {"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}}
    ]},
    {"role":"user","content":[
      {"type":"tool_result","tool_use_id":"toolu_01","content":"18C and sunny"},
      {"type":"text","text":"Thanks!"}
    ]}
  ]
}`

const fixtureChatRequest = `{
  "model": "gpt-x",
  "messages": [
    {"role":"system","content":"You are terse."},
    {"role":"user","content":[
      {"type":"text","text":"What is in this image, and the weather in Paris?"},
      {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
      {"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}
    ]},
    {"role":"assistant","content":"A cat. Checking the weather.","tool_calls":[{"id":"call_01","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
    {"role":"tool","tool_call_id":"call_01","content":"18C and sunny"},
    {"role":"user","content":"Thanks!"}
  ],
  "max_completion_tokens": 1024,
  "temperature": 0.5,
  "top_p": 0.9,
  "stop": ["END"],
  "tools": [{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
  "tool_choice": "auto"
}`

const fixtureResponsesRequest = `{
  "model": "gpt-x",
  "instructions": "You are terse.",
  "input": [
    {"role":"user","content":[
      {"type":"input_text","text":"What is in this image, and the weather in Paris?"},
      {"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="},
      {"type":"input_image","image_url":"https://example.com/cat.jpg"}
    ]},
    {"type":"message","role":"assistant","content":[{"type":"output_text","text":"A cat. Checking the weather.","annotations":[]}]},
    {"type":"function_call","call_id":"call_01","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
    {"type":"function_call_output","call_id":"call_01","output":"18C and sunny"},
    {"role":"user","content":"Thanks!"}
  ],
  "max_output_tokens": 1024,
  "temperature": 0.5,
  "top_p": 0.9,
  "reasoning": {"effort":"medium"},
  "tools": [{"type":"function","name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},{"type":"web_search_preview"}],
  "tool_choice": {"type":"function","name":"get_weather"}
}`

const fixtureMessagesResponse = `{"id":"msg_01ABC","type":"message","role":"assistant","model":"claude-x-20250101",
 "content":[{"type":"thinking","thinking":"Need weather.","signature":"sig=="},{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_02","name":"get_weather","input":{"city":"Rome"}}],
 "stop_reason":"tool_use","stop_sequence":null,
 "usage":{"input_tokens":100,"cache_creation_input_tokens":20,"cache_read_input_tokens":300,"output_tokens":42}}`

const fixtureChatResponse = `{"id":"chatcmpl-01ABC","object":"chat.completion","created":1700000000,"model":"gpt-x-2025",
 "choices":[{"index":0,"message":{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"call_02","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}],"refusal":null},"logprobs":null,"finish_reason":"tool_calls"}],
 "usage":{"prompt_tokens":420,"completion_tokens":42,"total_tokens":462,"prompt_tokens_details":{"cached_tokens":300,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":10}}}`

const fixtureResponsesResponse = `{"id":"resp_01ABC","object":"response","created_at":1700000000,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-x-2025",
 "output":[
  {"type":"reasoning","id":"rs_01","summary":[{"type":"summary_text","text":"Need weather."}]},
  {"type":"message","id":"msg_01","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me check.","annotations":[]}]},
  {"type":"function_call","id":"fc_01","call_id":"call_02","name":"get_weather","arguments":"{\"city\":\"Rome\"}","status":"completed"}
 ],
 "usage":{"input_tokens":420,"input_tokens_details":{"cached_tokens":300},"output_tokens":42,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":462}}`

// Anthropic SSE: thinking, text, tool_use with input_json_delta, ping.
const fixtureMessagesStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_01ABC","type":"message","role":"assistant","content":[],"model":"claude-x-20250101","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"cache_creation_input_tokens":20,"cache_read_input_tokens":300,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}` + "\n\n" +
	"event: ping\n" + `data: {"type": "ping"}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Need weather."}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig=="}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me "}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"check."}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":1}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"get_weather","input":{}}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Rome\"}"}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":2}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

// OpenAI chat chunks: role, text, one tool call in pieces, finish, usage.
const fixtureChatStream = `data: {"id":"chatcmpl-01ABC","object":"chat.completion.chunk","created":1700000000,"model":"gpt-x-2025","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
	`data: {"id":"chatcmpl-01ABC","object":"chat.completion.chunk","created":1700000000,"model":"gpt-x-2025","choices":[{"index":0,"delta":{"content":"Let me "},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
	`data: {"id":"chatcmpl-01ABC","object":"chat.completion.chunk","created":1700000000,"model":"gpt-x-2025","choices":[{"index":0,"delta":{"content":"check."},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
	`data: {"id":"chatcmpl-01ABC","object":"chat.completion.chunk","created":1700000000,"model":"gpt-x-2025","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_02","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
	`data: {"id":"chatcmpl-01ABC","object":"chat.completion.chunk","created":1700000000,"model":"gpt-x-2025","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
	`data: {"id":"chatcmpl-01ABC","object":"chat.completion.chunk","created":1700000000,"model":"gpt-x-2025","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Rome\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
	`data: {"id":"chatcmpl-01ABC","object":"chat.completion.chunk","created":1700000000,"model":"gpt-x-2025","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}` + "\n\n" +
	`data: {"id":"chatcmpl-01ABC","object":"chat.completion.chunk","created":1700000000,"model":"gpt-x-2025","choices":[],"usage":{"prompt_tokens":420,"completion_tokens":42,"total_tokens":462,"prompt_tokens_details":{"cached_tokens":300},"completion_tokens_details":{"reasoning_tokens":10}}}` + "\n\n" +
	"data: [DONE]\n\n"

// OpenAI Responses events: text message then a function call.
const fixtureResponsesStream = "event: response.created\n" +
	`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_01ABC","object":"response","created_at":1700000000,"status":"in_progress","model":"gpt-x-2025","output":[],"usage":null}}` + "\n\n" +
	"event: response.in_progress\n" +
	`data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_01ABC","object":"response","created_at":1700000000,"status":"in_progress","model":"gpt-x-2025","output":[],"usage":null}}` + "\n\n" +
	"event: response.output_item.added\n" +
	`data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_01","type":"message","status":"in_progress","role":"assistant","content":[]}}` + "\n\n" +
	"event: response.content_part.added\n" +
	`data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_01","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}` + "\n\n" +
	"event: response.output_text.delta\n" +
	`data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_01","output_index":0,"content_index":0,"delta":"Let me ","logprobs":[]}` + "\n\n" +
	"event: response.output_text.delta\n" +
	`data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_01","output_index":0,"content_index":0,"delta":"check.","logprobs":[]}` + "\n\n" +
	"event: response.output_text.done\n" +
	`data: {"type":"response.output_text.done","sequence_number":6,"item_id":"msg_01","output_index":0,"content_index":0,"text":"Let me check.","logprobs":[]}` + "\n\n" +
	"event: response.content_part.done\n" +
	`data: {"type":"response.content_part.done","sequence_number":7,"item_id":"msg_01","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Let me check.","annotations":[]}}` + "\n\n" +
	"event: response.output_item.done\n" +
	`data: {"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":{"id":"msg_01","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me check.","annotations":[]}]}}` + "\n\n" +
	"event: response.output_item.added\n" +
	`data: {"type":"response.output_item.added","sequence_number":9,"output_index":1,"item":{"id":"fc_01","type":"function_call","status":"in_progress","arguments":"","call_id":"call_02","name":"get_weather"}}` + "\n\n" +
	"event: response.function_call_arguments.delta\n" +
	`data: {"type":"response.function_call_arguments.delta","sequence_number":10,"item_id":"fc_01","output_index":1,"delta":"{\"city\": "}` + "\n\n" +
	"event: response.function_call_arguments.delta\n" +
	`data: {"type":"response.function_call_arguments.delta","sequence_number":11,"item_id":"fc_01","output_index":1,"delta":"\"Rome\"}"}` + "\n\n" +
	"event: response.function_call_arguments.done\n" +
	`data: {"type":"response.function_call_arguments.done","sequence_number":12,"item_id":"fc_01","output_index":1,"arguments":"{\"city\": \"Rome\"}"}` + "\n\n" +
	"event: response.output_item.done\n" +
	`data: {"type":"response.output_item.done","sequence_number":13,"output_index":1,"item":{"id":"fc_01","type":"function_call","status":"completed","arguments":"{\"city\": \"Rome\"}","call_id":"call_02","name":"get_weather"}}` + "\n\n" +
	"event: response.completed\n" +
	`data: {"type":"response.completed","sequence_number":14,"response":{"id":"resp_01ABC","object":"response","created_at":1700000000,"status":"completed","model":"gpt-x-2025","output":[],"usage":{"input_tokens":420,"input_tokens_details":{"cached_tokens":300},"output_tokens":42,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":462}}}` + "\n\n"
