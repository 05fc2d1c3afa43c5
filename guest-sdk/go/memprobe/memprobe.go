// Package memprobe is a kind that allocates what its input asks, to show where a Go
// guest's memory ends (see the SDK's README, "Memory", and e2e.sh).
//
// Its one step, `allocate`, takes {"mib": N, "chunk_kib": K}: it allocates N MiB in
// K-KiB slices (default 1024), fills each with a pattern, writes to stderr and runs
// the GC (both go through the preview-1 adapter, whose memory a broken build lets Go's
// heap overwrite), then checks every byte. It completes with what it saw, or is refused
// `corrupted` if a byte changed.
package memprobe

import (
	"fmt"
	"os"
	"runtime"

	"spindle.dev/guest"
)

// Kind is the probe, as build-kind.sh exports it.
var Kind = &guest.Kind{
	Name:  "memprobe-go",
	Steps: []guest.Step{{Key: "allocate", Run: allocate}},
	Retry: guest.RetryPolicy{MaxAttempts: 1},
}

// Request is how much to allocate, and in what slices.
type Request struct {
	MiB      int `json:"mib"`
	ChunkKiB int `json:"chunk_kib"`
}

// Validate refuses sizes a slice cannot take.
func (r *Request) Validate() error {
	if r.MiB < 0 || r.ChunkKiB < 0 || r.MiB > 1<<20 {
		return fmt.Errorf("sizes must be within 0 to %d MiB", 1<<20)
	}
	if r.ChunkKiB == 0 {
		r.ChunkKiB = 1024
	}
	return nil
}

// Report is what the probe saw.
type Report struct {
	MiB      int  `json:"mib"`
	ChunkKiB int  `json:"chunk_kib"`
	Intact   bool `json:"intact"`
	// SysMiB is what Go's runtime took from linear memory (it never gives any back).
	SysMiB uint64 `json:"sys_mib"`
}

func allocate(c *guest.Call) (any, error) {
	var r Request
	if err := c.Input(&r); err != nil {
		return nil, err
	}
	chunk := r.ChunkKiB << 10
	var slices [][]byte
	for left := r.MiB << 20; left > 0; left -= chunk {
		b := make([]byte, min(chunk, left))
		for i := range b {
			b[i] = byte(i * 7)
		}
		slices = append(slices, b)
	}
	fmt.Fprintf(os.Stderr, "memprobe: filled %d MiB in %d slices\n", r.MiB, len(slices))
	runtime.GC()
	intact := true
	for _, b := range slices {
		for i := range b {
			intact = intact && b[i] == byte(i*7)
		}
	}
	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)
	report := Report{MiB: r.MiB, ChunkKiB: r.ChunkKiB, Intact: intact, SysMiB: stats.Sys >> 20}
	c.Logf(guest.LevelInfo, "memprobe: %+v", report)
	if !intact {
		return nil, &guest.Refused{Code: "corrupted", Message: fmt.Sprintf("a byte of %d MiB changed after the GC", r.MiB)}
	}
	runtime.KeepAlive(slices)
	return report, nil
}
