package main

import (
	"testing"

	"github.com/modelgate/modelgate/gateway/usagelog"
)

func TestParseDurabilities(t *testing.T) {
	got, err := parseDurabilities("disk, process")
	if err != nil {
		t.Fatal(err)
	}
	want := []gatewayTarget{{"modelgate (disk)", "gateway", usagelog.DurableDisk}, {"modelgate (process)", "gateway-process", usagelog.DurableProcess}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v (names and profile names)", got, want)
	}
	for _, bad := range []string{"disk,disk", "memory", "process,,process"} {
		if _, err := parseDurabilities(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
