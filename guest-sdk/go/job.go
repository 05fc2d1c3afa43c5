package guest

import "fmt"

// JobSummary is what the failure and success hooks receive, as a runner hands it to
// [Kind.RunOnFailure] and [Kind.RunOnSuccess].
type JobSummary struct {
	JobID string
	// Payload is the job's input as submitted.
	Payload []byte
	// Outputs are the outputs of the steps that completed, in order.
	Outputs []PriorOutput
	// Failure is why the job failed (for on-failure); nil for on-success.
	Failure *Failure
}

// A Job is a settled job as a hook sees it, with the same line to the host a step has.
type Job struct {
	JobSummary
	host Host
}

// Input decodes the job's input into v, as [Call.Input] does.
func (j *Job) Input(v any) error { return decode(j.Payload, v, "the job's input", "invalid-input") }

// Output decodes a completed step's output into v; false if the step did not complete.
func (j *Job) Output(step string, v any) (bool, error) {
	for _, o := range j.Outputs {
		if o.Step == step {
			return true, decode(o.Output, v, fmt.Sprintf("the output of step `%s`", step), "invalid-prior")
		}
	}
	return false, nil
}

// Log writes one line to the host's log.
func (j *Job) Log(level Level, message string) { j.host.Log(level, message) }

// Logf writes one formatted line to the host's log.
func (j *Job) Logf(level Level, format string, args ...any) {
	j.host.Log(level, fmt.Sprintf(format, args...))
}

// Config is the deployment's settings and the tenant's secrets.
func (j *Job) Config() Config { return Config{j.host} }
