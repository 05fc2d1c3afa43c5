package guest

import "strconv"

// Host is what a step reaches beyond its input: the host's `host` and `config`
// interfaces, `wasi:http`'s outgoing handler and stderr. The component's adapter
// implements it over the bindings and guesttest over what a test set; a kind's code
// uses it through [Call] and [Job], and net/http through spindle.dev/guest/wasihttp.
type Host interface {
	Log(level Level, message string)
	Heartbeat(progress *Checkpoint) Heartbeat
	// PriorOutput asks the host for a completed step's output when the call's input
	// left it out (the host caps what it sends).
	PriorOutput(step string) ([]byte, bool)
	Setting(name string) (string, bool)
	Secret(name string) (string, bool)
	HMACSHA256(secret string, message []byte) ([]byte, bool)
	// SendHTTP sends one outbound request and returns the response's head, its body
	// still to read; a request that got no response is an [*HTTPError]. The host's
	// policy decides what may be sent, and replaces secrets' placeholders in headers.
	SendHTTP(req *OutboundRequest) (*OutboundResponse, error)
	// Stderr receives panic reports and uncaught errors; the host keeps the last lines
	// of a failed attempt in its record.
	Stderr(text string)
}

// Level is the severity of a log line, in the WIT's order.
type Level uint8

const (
	LevelTrace Level = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

func (l Level) String() string {
	switch l {
	case LevelTrace:
		return "trace"
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	case LevelError:
		return "error"
	}
	return "level(" + strconv.Itoa(int(l)) + ")"
}

// Heartbeat is the host's answer to [Call.Heartbeat], in the WIT's order.
type Heartbeat uint8

const (
	// Proceed: keep working.
	Proceed Heartbeat = iota
	// StopCancelled: the job is being cancelled; stop soon, it settles cancelled
	// whatever the step reports.
	StopCancelled
	// StopLeaseLost: this host lost the job's lease; stop, whatever the step reports is
	// refused.
	StopLeaseLost
)

// ShouldStop reports whether the step should stop working and return.
func (h Heartbeat) ShouldStop() bool { return h != Proceed }

func (h Heartbeat) String() string {
	switch h {
	case Proceed:
		return "proceed"
	case StopCancelled:
		return "stop-cancelled"
	case StopLeaseLost:
		return "stop-lease-lost"
	}
	return "heartbeat(?)"
}

// Checkpoint is progress: where to resume, units of work done, units in all (0: not
// known).
type Checkpoint struct {
	Cursor string
	Done   uint64
	Total  uint64
}

// Config is the kind's deployment settings and its tenant's secrets.
//
// Settings are plain values per deployment (`spindle deploy KIND FILE --set
// NAME=VALUE`). Secrets belong to the tenant and the guest never holds one: a
// deployment declares the names it uses (`--secret NAME@RULE`), [Config.Secret] hands back a
// placeholder, and the host puts the value in its place in the headers of outbound
// requests its policy allows. [Config.HMACSHA256] signs with a secret instead.
type Config struct{ host Host }

// Get is the deployment's setting name, if set.
func (c Config) Get(name string) (string, bool) { return c.host.Setting(name) }

// Secret is a placeholder standing for the tenant's secret name, if the deployment
// declared it and the tenant set it. Opaque and different on each call: put it in a
// header, never store or compare it.
func (c Config) Secret(name string) (string, bool) { return c.host.Secret(name) }

// HMACSHA256 is HMAC-SHA256 of message under the tenant's secret, signed by the host
// without the guest holding the key; false if the secret is not available.
func (c Config) HMACSHA256(secret string, message []byte) ([]byte, bool) {
	return c.host.HMACSHA256(secret, message)
}
