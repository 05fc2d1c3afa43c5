package guest

// A FanOut is the children an [AwaitChildren] step creates and when it is called again.
type FanOut struct {
	// Children are created with the outcome in one transaction, keyed by (parent, step,
	// pass, index): a repeated report never creates one twice.
	Children []Child
	// Join is when the step is called again; the zero value waits for all children.
	Join Join
	// Leftover is what happens to children still open once the join is met; the zero
	// value cancels them.
	Leftover Leftover
	// Cursor is handed back on the next call; empty: none.
	Cursor string
}

// A Child is one child job to create.
type Child struct {
	// Kind is the child's kind, deployed in the parent's tenant.
	Kind string
	// Input is the child's input: JSON-encoded, except []byte and [json.RawMessage].
	Input any
	// IdempotencyKey names the child among the tenant's jobs; empty: none.
	IdempotencyKey string
	// Priority is the child's priority layer; the zero value is the host's default
	// (normal).
	Priority Priority
	// LeaseKeys are leases the child must hold while a step runs.
	LeaseKeys []string
}

// InputBytes is the child's input as sent: what [AwaitChildren] encoded.
func (c Child) InputBytes() ([]byte, error) { return encode(c.Input) }

// Join is when an awaiting step is called again: once all children are final (the zero
// value), the first ([JoinAny]), or a number ([JoinCount]).
type Join struct {
	Mode JoinMode
	// N is the count for [JoinByCount].
	N uint32
}

// JoinMode is a [Join]'s rule, in the WIT's order.
type JoinMode uint8

const (
	JoinAll JoinMode = iota
	JoinFirst
	JoinByCount
)

// JoinAny calls the step again once the first child is final.
func JoinAny() Join { return Join{Mode: JoinFirst} }

// JoinCount calls the step again once n children are final.
func JoinCount(n uint32) Join { return Join{Mode: JoinByCount, N: n} }

// Leftover is what happens to children still open once the join is met, in the WIT's
// order.
type Leftover uint8

const (
	LeftoverCancel Leftover = iota
	LeftoverKeep
)

// Priority is a child job's priority layer. PriorityDefault leaves it to the host
// (normal); the others follow the WIT's order.
type Priority uint8

const (
	PriorityDefault Priority = iota
	PriorityCritical
	PriorityScheduled
	PriorityNormal
	PriorityBackground
)

// Awaited is what a call follows: nothing (the zero value), the children of its
// [AwaitChildren], or its [AwaitSignal]'s body or timeout.
type Awaited struct {
	Kind AwaitedKind
	// Children are the children's results, in the order the step asked for them.
	Children []ChildResult
	// Signal is the awaited signal's body.
	Signal []byte
}

// AwaitedKind says what an [Awaited] holds.
type AwaitedKind uint8

const (
	AwaitedNothing AwaitedKind = iota
	AwaitedChildren
	AwaitedSignal
	AwaitedSignalTimeout
)

// ChildResult is a child job's result as its parent's step receives it.
type ChildResult struct {
	JobID string
	Kind  string
	// State is final, or ChildOpen while the child runs on (join any or count).
	State ChildState
	// Output is the child's last step's output when it succeeded, else nil.
	Output []byte
	// Failure is why it failed or was cancelled, if said.
	Failure *Failure
}

// ChildState is a child's state as its parent sees it.
type ChildState uint8

const (
	// ChildOpen: not final yet (join any or count met first).
	ChildOpen ChildState = iota
	ChildSucceeded
	ChildFailed
	ChildCancelled
)

func (s ChildState) String() string {
	return [...]string{"open", "succeeded", "failed", "cancelled"}[s&3]
}

// OutputJSON decodes the child's output into v; false if it has none. An output that
// does not fit is an [*InvalidInput] with code `invalid-child-output`.
func (r ChildResult) OutputJSON(v any) (bool, error) {
	if r.Output == nil {
		return false, nil
	}
	return true, decode(r.Output, v, "the output of child "+r.JobID, "invalid-child-output")
}
