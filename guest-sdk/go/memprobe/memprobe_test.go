package memprobe

import (
	"testing"

	"spindle.dev/guest/guesttest"
)

func TestAllocatesAndChecksNatively(t *testing.T) {
	run := guesttest.RunJob(Kind, Request{MiB: 8, ChunkKiB: 64}, nil)
	var report Report
	if ok, err := run.Output("allocate", &report); !ok || err != nil || !report.Intact || report.MiB != 8 {
		t.Fatalf("report %+v %v %v (failure %+v)", report, ok, err, run.Failure)
	}
	if bad := guesttest.RunJob(Kind, Request{MiB: -1}, nil); bad.Failure == nil || bad.Failure.Code != "invalid-input" {
		t.Errorf("a negative size: %+v", bad.Failure)
	}
}
