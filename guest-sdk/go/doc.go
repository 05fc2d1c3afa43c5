// Package guest writes Spindle job kinds in Go.
//
// A job kind is a WebAssembly component of the `job-kind` world (wit/job.wit). With this
// package a kind is one [Kind] value: its name, its steps (functions keyed by step, in
// order), its retry policy and hooks. The SDK decodes JSON input into Go values, maps
// returned errors onto outcomes by type, recovers panics, and keeps the generated
// bindings out of the kind's code:
//
//	var Kind = &guest.Kind{
//		Name:  "greet-go",
//		Steps: []guest.Step{{Key: "compose", Run: compose}, {Key: "deliver", Run: deliver}},
//		Retry: guest.RetryPolicy{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
//	}
//
//	func compose(c *guest.Call) (any, error) {
//		var in Input
//		if err := c.Input(&in); err != nil {
//			return nil, err // refused `invalid-input`
//		}
//		return map[string]string{"text": "Hello, " + in.Name + "!"}, nil
//	}
//
// A step returns an [Outcome] (see [Complete], [Skip], [More], [Snooze], [AwaitChildren],
// [AwaitSignal]) or any JSON-able value, which completes it. A returned [*Refused] fails
// the job, a [*Retryable] is retried within the budget, an [*InvalidInput] is refused
// `invalid-input`; any other error, and any panic, is retried as `uncaught-exception`
// with `<type>: <message>`, its detail (a panic's stack) on stderr, which the host keeps
// in the failed attempt's record.
//
// Outbound HTTP is net/http's: importing spindle.dev/guest/wasihttp makes its transport,
// which sends through the host's `wasi:http`, net/http's default; a request that gets
// no response fails with an [*HTTPError].
//
// Nothing here needs WebAssembly: `go test` runs a kind natively, and the guesttest
// package drives whole jobs the way the host would (its HTTP option answers requests).
// The component's adapter (component/*.go, built only for wasip1) is the one place that
// touches the generated bindings; build-kind.sh assembles it with the kind into a
// component.
package guest
