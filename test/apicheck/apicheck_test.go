package apicheck

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Anthropic's batch results are JSONL: a body of JSON lines validates, one
// with a line that is not JSON does not.
func TestCheckJSONL(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/messages/batches/msgbatch_0123/results", nil)
	h := http.Header{"Content-Type": {"application/x-jsonl"}}
	good := `{"custom_id":"a","result":{"type":"canceled"}}` + "\n" + `{"custom_id":"b","result":{"type":"expired"}}` + "\n"
	if err := c.Check(req, http.StatusOK, h, []byte(good)); err != nil {
		t.Errorf("JSON lines: %v", err)
	}
	if err := c.Check(req, http.StatusOK, h, []byte(good+"not json\n")); err == nil {
		t.Error("a line that is not JSON validated")
	}
}
