"""The bodies of Spindle's HTTP API, as TypedDicts. Generated from the OpenAPI document
by generate_types.py: do not edit by hand (``cargo xtask test`` checks it is current)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:
    from typing import TypedDict
except ImportError:  # pragma: no cover
    from typing_extensions import TypedDict


class _ActionRequired(TypedDict):
    allowed: bool
    """It would."""


class Action(_ActionRequired, total=False):
    """Whether a command would be taken now."""
    reason: Optional[str]
    """Why not."""


class Actions(TypedDict):
    """The run-control commands, as the job's machine would answer them now."""
    cancel: Action
    """`POST /v1/jobs/{id}/cancel`."""
    pause: Action
    """`POST /v1/jobs/{id}/pause`."""
    restart: Action
    """`POST /v1/jobs/{id}/restart`."""
    resume: Action
    """`POST /v1/jobs/{id}/resume`."""
    retry: Action
    """`POST /v1/jobs/{id}/retry`."""


class AlertList(TypedDict):
    """The latest alerts, newest first."""
    alerts: List[AlertView]
    """Them."""


class _AlertViewRequired(TypedDict):
    at: str
    """When it was raised last."""
    code: str
    """What: `late-success` (a step succeeded after its job had failed), or a sandbox
    fault's code (`sandbox.deadline`, `sandbox.panic`, …).
    """
    count: int
    """How many times it was raised."""
    first_at: str
    """When it was first raised (alerts of one tenant, kind and code within a minute are one)."""
    kind: str
    """The kind."""
    message: str
    """What it said."""
    tenant: str
    """The tenant."""


class AlertView(_AlertViewRequired, total=False):
    """An operational alert."""
    job: Optional[str]
    """The job that raised it last."""


class _AttemptViewRequired(TypedDict):
    fence: int
    """The fencing token of the claim it ran under."""
    number: int
    """1 for the first attempt."""
    outcome: str
    """`running`, `completed`, `skipped`, `retryable` or `failed`."""
    started_at: str
    """When it began."""


class AttemptView(_AttemptViewRequired, total=False):
    """One attempt of a step."""
    duration_ms: Optional[int]
    """How long it ran, once it ended, milliseconds."""
    ended_at: Optional[str]
    """When it ended."""
    failure: Optional[FailureView]


class BreakerStateView(TypedDict):
    """A kind version's fault breaker on the host that answered."""
    recent_faults: int
    """Faults counted in its window now."""
    state: str
    """`closed` (claims flow), `open` (held for a cool-down) or `half_open` (one probe at
    a time).
    """
    version: int
    """The version."""


class _CallViewRequired(TypedDict):
    at: str
    """When the call that made it ended."""
    attempt: int
    """The attempt."""
    bytes: int
    """Response body bytes received."""
    duration_ms: int
    """Milliseconds to the response head (or the error)."""
    method: str
    """The method."""
    seq: int
    """Its position among the call's requests, from 1."""
    step: str
    """The step."""
    url: str
    """`scheme://host:port/path`, without the query."""


class CallView(_CallViewRequired, total=False):
    """One outbound request a step attempt made: no query values, headers or bodies."""
    denied: Optional[str]
    """The policy layer that denied it (`operator-policy`, `tenant-policy`, `kind-policy`,
    `blocked-address`, `request-limit`), if one did.
    """
    error: Optional[str]
    """The error the step got instead (a `wasi:http` error code)."""
    status: Optional[int]
    """The response's status, if one came."""


class CancelBody(TypedDict):
    """A cancellation."""
    reason: str
    """Why (nonblank); kept in the job's history."""


class CancelRequestView(TypedDict):
    """A recorded cancellation, waiting for the step in flight."""
    actor: str
    """Who asked (`api:TENANT` for the API)."""
    at: str
    """When."""
    reason: str
    """Why."""


class _CapacityViewRequired(TypedDict):
    kinds: List[KindUsageView]
    """Its kinds."""
    limits: LimitsView
    """Its limits."""
    tenant: str
    """The tenant."""


class CapacityView(_CapacityViewRequired, total=False):
    """A tenant's limits and usage."""
    deployed_bytes: int
    """Bytes its kinds' versions hold, uploads and compiled code together (what
    `max_deployed_bytes` bounds).
    """


class _CreatedTokenRequired(TypedDict):
    id: str
    """Its public id, to list and revoke it by."""
    name: str
    """What it is for."""
    role: str
    """What the token may do: a tenant's work, or managing tenants and tokens."""
    token: str
    """The bearer token."""


class CreatedToken(_CreatedTokenRequired, total=False):
    """A new token. The bearer token is shown this once: only its hash is kept."""
    expires_at: Optional[str]
    """When it stops working (RFC 3339, UTC); absent: when it is revoked."""
    tenant: Optional[str]
    """The tenant it works for; absent for an operator token."""


class DeadLetterCount(TypedDict):
    """How many dead letters a filter matches."""
    capped: bool
    """Whether the count stopped at 10,000 (there may be more)."""
    matching: int
    """How many, up to 10,000."""


class DeadLetterRetry(TypedDict, total=False):
    """Which dead letters to retry (all of the tenant's without a field)."""
    failed_before: Optional[str]
    """Only those that failed before this time (RFC 3339)."""
    failure_code: Optional[str]
    """Only those that failed with this code."""
    kind: Optional[str]
    """Only this kind's."""


class _DeployViewRequired(TypedDict):
    created_at: str
    """When it was uploaded."""
    digest: str
    """The component's SHA-256."""
    id: str
    """Its id: `GET /v1/kinds/{kind}/deploys/{id}` answers its state."""
    kind: str
    """The kind it deploys."""
    size: int
    """Its size in bytes."""
    state: str
    """`compiling`, `ready` (then `version` is the new current version) or `failed`
    (then `error` says why: a `component.*` code such as `component.compile-timeout`,
    `component.describe-failed` or `component.name-mismatch`, or `deploy.interrupted`
    when the host compiling it went away).
    """


class DeployView(_DeployViewRequired, total=False):
    """A deploy: the component was checked when it was uploaded (size, header, imports and
    exports) and compiles in the background; this says how far it got.
    """
    error: Optional[ErrorDetail]
    finished_at: Optional[str]
    """When it became ready or failed."""
    version: Optional[int]
    """The version it made, once ready."""


class Deployed(TypedDict):
    """A new version, deployed and current."""
    deploy: DeployView
    """The deploy that made it."""
    digest: str
    """The component's SHA-256."""
    kind: str
    """The kind."""
    spec: SpecView
    """What the component says of itself."""
    version: int
    """The new version's number."""


class DeploymentView(TypedDict, total=False):
    """What a deployment allows its steps, declares and sets."""
    allow: List[str]
    """Outbound rules (`METHOD scheme://host[:port]/path`): the kind's layer of the policy."""
    max_running: Optional[int]
    """Steps of the kind running at once, on every host together (the latest deployment's
    limit holds).
    """
    record: Optional[str]
    """What the kind keeps of its jobs: `full` (the default: the job row, a row per step,
    the history) or `lean` (the job row alone: no step or history rows, for
    high-volume kinds).
    """
    secrets: List[str]
    """The tenant secrets its steps may use, each bound to a destination it may be sent
    to: `NAME@RULE`, a name once per destination (a secret deployed before bindings
    shows as its name alone, and may go wherever `allow` reaches).
    """
    secrets_in_body: bool
    """Whether secrets are put in place in request bodies too."""
    settings: Dict[str, str]
    """Its settings (`config.get`)."""


class ErrorBody(TypedDict):
    """`{"error": {...}}`: what every 4xx and 5xx answer carries."""
    error: ErrorDetail
    """What went wrong."""


class _ErrorDetailRequired(TypedDict):
    code: str
    """The stable code callers branch on; it fixes the HTTP status."""
    message: str
    """An operator-safe explanation."""


class ErrorDetail(_ErrorDetailRequired, total=False):
    """A stable code, an operator-safe message and, when the job's machine refused a command,
    the refusal's own code and the job's state.
    """
    index: Optional[int]
    """With `invalid-input` from a bulk submission: which submission (0-based) broke
    its kind's schema.
    """
    reason: str
    """With `illegal-transition`: the job machine's own refusal code (see `spindle_core::Refusal`)."""
    state: str
    """The job's state."""
    violations: Optional[List[ViolationView]]
    """With `invalid-input`: each way the input breaks its kind's schema (at most 20)."""


class _FailureViewRequired(TypedDict):
    code: str
    """Stable, machine-readable reason, e.g. `card-declined` or `sandbox.deadline`."""
    message: str
    """Operator-safe explanation (empty for transient failures, whose detail is logged)."""


class FailureView(_FailureViewRequired, total=False):
    """A failure as shown."""
    correlation: Optional[str]
    """Reference to the host log lines that hold the detail, when there is any."""
    guest_stderr: Optional[str]
    """The last lines the step's guest wrote to stderr in the attempt that failed (a
    traceback, a panic message), capped: the tenant's own code's words.
    """


Finalized = TypedDict("Finalized", {"from": "int", "to": "int"})
"""`POST /v1/upgrade/finalize`: the gate moved."""


class GateView(TypedDict):
    """The storage format gate: the format every host writes."""
    format: int
    """The format."""
    moved_at: str
    """When it was set or last moved."""
    moved_by: str
    """Who set it (the first host) or moved it (the operator, through which host)."""


class _HealthRequired(TypedDict):
    status: str
    """`ok` while the host answers and may write; `refusing` while the storage format
    gate refuses it (it answers, claims nothing and writes no job: `storage.refusal`
    says why).
    """


class Health(_HealthRequired, total=False):
    """`GET /v1/health`."""
    draining: bool
    """Whether it finishes what it holds and claims nothing new (`--drain`)."""
    storage: Optional[StorageHealth]


class HistoryEntryView(TypedDict):
    """One history entry: when, what, and the event's own fields."""
    at: str
    """When it happened."""
    event: str
    """What happened (`submitted`, `step_started`, `step_retrying`, …)."""
    id: int
    """Its order within the store (a follower of the job's events resumes after it)."""


class _HostListRequired(TypedDict):
    hosts: List[HostView]
    """Every recorded host, by id."""


class HostList(_HostListRequired, total=False):
    """`GET /v1/hosts`."""
    gate: Optional[GateView]


class _HostViewRequired(TypedDict):
    build: str
    """Its build: version and commit (`spindle 0.1.0 (3f2a9c1e4b7d)`)."""
    contracts: List[str]
    """The contract versions it runs."""
    draining: bool
    """Whether it finishes what it holds and claims nothing new."""
    heartbeat_at: str
    """Its last heartbeat."""
    id: str
    """Its id (claims carry it)."""
    live: bool
    """Whether its heartbeat is current (an expired process is gone; its row stays
    listed for an hour).
    """
    reads: List[int]
    """The storage formats it reads, oldest and newest."""
    started_at: str
    """When it started."""
    writes: int
    """The newest storage format it writes."""


class HostView(_HostViewRequired, total=False):
    """A host as it announced itself."""
    instance: str
    """Its process's instance: two processes of one host id are two rows, told apart by
    it (empty for a process of a build from before instances).
    """


class _JobBulkRequired(TypedDict):
    action: str
    """`cancel` or `retry` (failed or cancelled jobs, each as a new linked job)."""


class JobBulk(_JobBulkRequired, total=False):
    """`POST /v1/jobs/bulk`: what to do to which jobs."""
    all: bool
    """Every job of the tenant, with no filter: said outright, so that a filter that is
    empty by mistake never widens to everything.
    """
    filter: JobSelectionBody
    """Which jobs: at least one criterion, unless `all` says every job of the tenant."""
    through: Optional[int]
    """The `through` of the count that was confirmed (required): jobs submitted after it
    are left alone.
    """


class _JobCountRequired(TypedDict):
    capped: bool
    """Whether the count stopped at 10,000 (there may be more)."""
    matching: int
    """How many, up to 10,000."""


class JobCount(_JobCountRequired, total=False):
    """How many jobs a filter matches, before a bulk action."""
    skipping: Optional[int]
    """Of those counted, how many the action (`?action=`) would skip now: a final job
    to cancel, a running one to retry, one retried already. Absent from older hosts.
    """
    through: Optional[int]
    """The newest matching job's place in the order of submission: pass it to
    `POST /v1/jobs/bulk` so that the action takes the jobs counted, not later ones.
    """


class JobCounts(TypedDict):
    """`GET /v1/jobs/counts`: the tenant's jobs per state and per kind."""
    cap: int
    """Most rows one state's count reads: past it the count says `capped` (at least)."""
    kinds: List[KindCounts]
    """Per kind, every kind with jobs."""
    states: List[StateCount]
    """Per state, every state (0 included), of the kind asked for when one was."""


class JobLive(TypedDict):
    """A job's state and progress, as its events stream them."""
    progress: int
    """Percent done."""
    state: str
    """Its state."""


class _JobPageRequired(TypedDict):
    jobs: List[JobSummaryView]
    """The jobs."""


class JobPage(_JobPageRequired, total=False):
    """A page of jobs, newest first."""
    next_cursor: Optional[int]
    """Pass as `cursor` for the next page; `null` on the last one."""


class JobSelectionBody(TypedDict, total=False):
    """Which jobs a bulk cancel or retry takes: the job listing's filters (blank fields match
    everything).
    """
    created_after: Optional[str]
    """Only jobs submitted at or after this time (RFC 3339)."""
    created_before: Optional[str]
    """Only jobs submitted before this time (RFC 3339)."""
    kind: Optional[str]
    """Only jobs of this kind."""
    parent: Optional[str]
    """Only children of this job."""
    priority: Optional[str]
    """Only jobs of this priority class."""
    q: Optional[str]
    """The job with this id, or the jobs whose idempotency key starts with this."""
    state: Optional[str]
    """Only jobs in this state."""


class _JobSummaryViewRequired(TypedDict):
    created_at: str
    """When it was submitted."""
    id: str
    """The job's id."""
    kind: str
    """Its kind."""
    kind_version: int
    """The kind's version it is pinned to."""
    priority: str
    """A priority class, most urgent first."""
    progress: int
    """Percent done."""
    state: str
    """The job's state."""


class JobSummaryView(_JobSummaryViewRequired, total=False):
    """A job in a list."""
    failure_code: Optional[str]
    """Its failure's code."""
    idempotency_key: Optional[str]
    """Its idempotency key."""
    settled_at: Optional[str]
    """When it became final."""


JobView = TypedDict("JobView", {"actions": "Optional[Actions]", "cancel_requested": "Optional[CancelRequestView]", "children": "Optional[str]", "claimed": "bool", "created_at": "str", "failure": "Optional[FailureView]", "history": "Optional[List[HistoryEntryView]]", "id": "str", "idempotency_key": "Optional[str]", "input": "Any", "input_withheld": "Optional[Withheld]", "kind": "str", "kind_version": "int", "lease_keys": "List[str]", "logs_capped": "Optional[bool]", "outbound": "Optional[List[CallView]]", "parent": "Optional[str]", "pass": "int", "pause_requested": "bool", "pending_signals": "Dict[str, int]", "predecessor": "Optional[str]", "priority": "str", "progress": "int", "record": "str", "restart_requested": "bool", "run_at": "str", "settled_at": "Optional[str]", "started_at": "Optional[str]", "state": "str", "steps": "List[StepView]", "successor": "Optional[str]", "waiting_for": "Any"}, total=False)
"""A job, whole."""


class KindCounts(TypedDict):
    """One kind's jobs by state."""
    kind: str
    """The kind."""
    states: List[StateCount]
    """Its counts, for each state it has jobs in (from the rows each state's count read:
    a sample where that state's count is capped).
    """


class _KindListRequired(TypedDict):
    kinds: List[KindView]
    """Each kind, without its versions."""


class KindList(_KindListRequired, total=False):
    """The tenant's kinds."""
    compiling: List[DeployView]
    """Deploys still compiling, of any kind (a kind's first version is listed here
    before the kind is).
    """


class _KindUsageViewRequired(TypedDict):
    faults: int
    """Steps that faulted in the sandbox or ran out of time."""
    kind: str
    """The kind."""
    outbound_requests: int
    """Outbound HTTP requests sent."""
    queued: int
    """Jobs submitted and not yet started, now."""
    running: int
    """Steps running, now."""
    sandbox_micros: int
    """Time inside the sandbox, in microseconds."""
    steps: int
    """Steps run so far (every attempt)."""
    wall_micros: int
    """Time from claim to outcome, in microseconds."""


class KindUsageView(_KindUsageViewRequired, total=False):
    """One kind's usage and load."""
    max_running: Optional[int]
    """Its running limit, when its deployment set one."""


class _KindViewRequired(TypedDict):
    current_version: int
    """The version new submissions use."""
    kind: str
    """Its name."""
    latest_version: int
    """The newest deployed version."""
    updated_at: str
    """When it last changed."""


class KindView(_KindViewRequired, total=False):
    """A kind."""
    breakers: List[BreakerStateView]
    """The fault breakers this host keeps for the kind's versions (a version whose steps
    never faulted here has none: closed).
    """
    deploys: List[DeployView]
    """Its latest deploys, newest first (only `GET /v1/kinds/{kind}` includes them)."""
    versions: Optional[List[VersionView]]
    """Every version, oldest first (only `GET /v1/kinds/{kind}` includes them)."""


class _LeaseInvalidatedRequired(TypedDict):
    key: str
    """The key, as the tenant names it."""


class LeaseInvalidated(_LeaseInvalidatedRequired, total=False):
    """An invalidated lease key."""
    held_by: Optional[str]
    """The job that held it, if any: it can no longer heartbeat or commit under it."""


class LimitsView(TypedDict, total=False):
    """A tenant's limits. Each field left out (or null) is "no limit" (for the sandbox
    ceilings: the host's own); a `PUT` replaces them all.
    """
    max_deployed_bytes: Optional[int]
    """Bytes of deployed components, every version together; a deploy past it is refused."""
    max_fuel: Optional[int]
    """A step's fuel (at most the host's, where it meters fuel)."""
    max_memory_bytes: Optional[int]
    """A step's linear memory (at most the host's)."""
    max_queued: Optional[int]
    """Jobs submitted and not yet started; a submission past it is refused (429)."""
    max_running: Optional[int]
    """Steps running at once, on every host together."""
    max_step_timeout_ms: Optional[int]
    """A step's time in milliseconds (at most the host's)."""
    rate_burst: Optional[int]
    """Submissions in one burst (default: one second's worth)."""
    rate_per_sec: Optional[int]
    """Submissions per second, sustained; past it a submission is refused (429)."""
    weight: Optional[int]
    """Its share of claims within a priority layer, against other tenants' (1 to 1000;
    default 1).
    """


class LogLineView(TypedDict):
    """One line of a job's logs."""
    at: str
    """When it was written (a stdout or stderr line: when its call ended)."""
    attempt: int
    """The attempt."""
    level: str
    """`trace`, `debug`, `info`, `warn` or `error` (stdout is `info`, stderr `warn`)."""
    message: str
    """The text."""
    seq: int
    """Its order (follow from the last one seen with `after`)."""
    step: str
    """The step."""
    stream: str
    """`log` (the host's `log` function), `stdout`, `stderr`, or `spindle` (the host's
    note of what a cap dropped).
    """


class LogPage(TypedDict):
    """A job's logs."""
    capped: bool
    """Whether the job reached its log cap."""
    dropped: int
    """Lines its cap dropped."""
    lines: List[LogLineView]
    """The lines, in order."""


class _NewScheduleRequired(TypedDict):
    cron: str
    """Five fields (minute hour day month weekday), or six with seconds first."""
    kind: str
    """The kind each firing submits."""
    name: str
    """Its name: 1-64 letters, digits, '-', '_' or '.', unique in the tenant."""


class NewSchedule(_NewScheduleRequired, total=False):
    """A new schedule."""
    catch_up: Optional[str]
    """Times missed by over a minute: `none` (default: skipped), `one` (the latest
    fires), `all` (every one fires). On-time times always fire.
    """
    input: Any
    """Each firing's input (JSON; default null)."""
    overlap: Optional[str]
    """`skip` (default: nothing fires while the last firing's job is open) or `allow`."""
    timezone: Optional[str]
    """An IANA time zone (default `UTC`)."""


class NewTenant(TypedDict):
    """A tenant to create."""
    name: str
    """Its name: 1-64 characters of a-z, 0-9, '-', '_' or '.'."""


class NewToken(TypedDict, total=False):
    """A token to create."""
    expires_in_secs: Optional[int]
    """Seconds until it stops working: 1 to ten years' worth. Without, it works until revoked."""
    name: Optional[str]
    """What it is for, shown in listings (default `issued`): 1-64 characters."""
    operator: bool
    """An operator token instead of a tenant's (the operator token only)."""
    tenant: Optional[str]
    """The tenant it works for. A tenant token may name only its own tenant (its default);
    the operator token names one, or asks for an operator token.
    """


class _OperationListRequired(TypedDict):
    operations: List[OperationView]
    """Them, newest first."""


class OperationList(_OperationListRequired, total=False):
    """A tenant's operations, newest first."""
    next_cursor: Optional[str]
    """Where the next (older) page starts, when there is one: pass it as `cursor`."""


class OperationStarted(TypedDict):
    """An operation, as it starts."""
    operation: OperationView
    """It."""


class _OperationViewRequired(TypedDict):
    action: str
    """What it does: `retry-dead-letters`, `cancel-jobs`, `retry-jobs`; or what happened:
    `operator-read` (an operator read the tenant's jobs; `filter` says what, with its
    query), `token-minted` and `token-revoked` (by the operator, for this tenant),
    `operator-token-use` (a request made with a tenant token the operator minted).
    """
    actor: str
    """Who asked."""
    created_at: str
    """When."""
    failed: int
    """Jobs it could not act on (retried meanwhile by other means, say)."""
    filter: Dict[str, Any]
    """What it applies to."""
    id: str
    """Its id."""
    matched: int
    """Jobs it matched so far."""
    retried: int
    """The same as `done` (its name from when retries were the only bulk action)."""
    state: str
    """`running`, `done` or `failed`."""


class OperationView(_OperationViewRequired, total=False):
    """A bulk operation."""
    done: int
    """Jobs it acted on (for a retry: new jobs made; for a cancel: jobs cancelled)."""
    finished_at: Optional[str]
    """When it ended."""


class QueueDepthView(TypedDict):
    """A tenant's open jobs of one kind and priority class, by where each waits."""
    blocked: int
    """Waiting for a lease key, a running limit or a breaker."""
    delayed: int
    """Waiting for their time: a delay, a retry's backoff, a snooze."""
    kind: str
    """The kind."""
    paused: int
    """Paused."""
    priority: str
    """The priority class."""
    ready: int
    """Ready to be claimed."""
    running: int
    """With a step running."""
    waiting: int
    """Waiting for children or a signal."""


class Queues(TypedDict):
    """The tenant's queues."""
    depth: List[QueueDepthView]
    """Open jobs by kind and priority class."""
    running_over_time: List[RunningSample]
    """Steps running over the last hour, every 10 s, oldest first."""


class Retention(TypedDict, total=False):
    """How long a tenant's finished jobs are kept."""
    retention_secs: Optional[int]
    """Seconds, from 60 to ten years; `null`: the host's default (`--retention`). Named
    in every request, `null` included.
    """


class RetryView(TypedDict):
    """A kind's retry policy."""
    initial_backoff_ms: int
    """First backoff, in milliseconds."""
    max_attempts: int
    """Attempts per step, the first included."""
    max_backoff_ms: int
    """Backoff ceiling, in milliseconds."""


class Rollback(TypedDict):
    """A rollback (or roll-forward) to an existing version."""
    version: int
    """The version new submissions should use."""


class RolledBack(TypedDict):
    """The version a kind's new submissions now use."""
    current_version: int
    """The version now current."""
    kind: str
    """The kind."""
    version: VersionView
    """That version."""


class RunningSample(TypedDict):
    """Steps running at one moment."""
    at: str
    """When they were counted."""
    running: int
    """How many."""


class ScheduleList(TypedDict):
    """A tenant's schedules."""
    schedules: List[ScheduleView]
    """By name."""


class _ScheduleViewRequired(TypedDict):
    catch_up: str
    """`none`, `one` or `all`."""
    cron: str
    """The cron expression."""
    fired: int
    """Firings so far."""
    input: Any
    """Each firing's input."""
    kind: str
    """The kind each firing submits."""
    name: str
    """Its name."""
    next_fire_at: str
    """When it fires next."""
    overlap: str
    """`skip` or `allow`."""
    paused: bool
    """Whether it is paused."""
    timezone: str
    """The time zone it is read in."""


class ScheduleView(_ScheduleViewRequired, total=False):
    """A cron schedule."""
    last_fired_at: Optional[str]
    """When it last fired."""
    last_job: Optional[str]
    """The job its last firing submitted."""
    upcoming: List[str]
    """Its next times, from `next_fire_at` (at most five; none while it is paused:
    resumed, it fires from its first time after then).
    """


class SecretList(TypedDict):
    """The tenant's secrets."""
    secrets: List[SecretView]
    """Each secret, by name."""


class SecretView(TypedDict):
    """A secret, as shown: its name and when it was last set."""
    name: str
    """Its name."""
    updated_at: str
    """When it was last set (RFC 3339)."""


class _SpecViewRequired(TypedDict):
    cancellable: bool
    """Whether its jobs may be cancelled."""
    has_failure_effect: bool
    """Whether `on-failure` runs when a job fails."""
    name: str
    """The name the component gives itself."""
    notifies_on_success: bool
    """Whether `on-success` runs when a job succeeds."""
    retry: RetryView
    """Its retry policy."""
    steps: List[StepSpecView]
    """Its steps, in order."""


class SpecView(_SpecViewRequired, total=False):
    """What a component says of itself (`describe`), as validation accepted it."""
    input_example: Optional[Dict[str, Any]]
    """An input that follows `input_schema`: its first `examples` entry, or one built
    from its types and required properties.
    """
    input_schema: Optional[Dict[str, Any]]
    """The JSON Schema a job's input must follow, if declared."""


class SqlRoleGranted(TypedDict):
    """`PUT /v1/tenants/{name}/sql-roles/{role}`: the role now submits as the tenant."""
    role: str
    """The database role."""
    tenant: str
    """The tenant."""


class StateCount(TypedDict):
    """Jobs of one state: how many."""
    capped: bool
    """Whether the count stopped at the cap."""
    count: int
    """How many, read up to `cap` (then at least this many)."""
    state: str
    """The state."""


class _StepSpecViewRequired(TypedDict):
    key: str
    """The step's key."""
    weight: int
    """Its progress weight."""


class StepSpecView(_StepSpecViewRequired, total=False):
    """One declared step."""
    output_schema: Optional[Dict[str, Any]]
    """The JSON Schema its output follows, if declared."""


class _StepViewRequired(TypedDict):
    attempts: List[AttemptView]
    """Its attempts, oldest first."""
    carried: bool
    """Completed by the predecessor this job retries, and not run again."""
    key: str
    """The step's key."""
    state: str
    """The step's state."""
    weight: int
    """Its share of the job's progress."""


class StepView(_StepViewRequired, total=False):
    """One step of a job."""
    done: Optional[int]
    """Units done, as the step last reported."""
    failure: Optional[FailureView]
    output: Any
    """Its output, when it is JSON of at most 64 KiB (see `output_withheld`)."""
    output_withheld: Optional[Withheld]
    skip_reason: Optional[str]
    """Why it was skipped."""
    total: Optional[int]
    """Units in all, when the step knows."""


class _StorageHealthRequired(TypedDict):
    reads: List[int]
    """The formats this build reads, oldest and newest."""
    writes: int
    """The newest format it writes."""


class StorageHealth(_StorageHealthRequired, total=False):
    """This host's storage formats, in `/v1/health`."""
    refusal: Optional[str]
    """Why it claims and writes nothing, while it refuses."""
    writing: Optional[int]
    """The format it writes now; absent while it refuses."""


class _SubmissionViewRequired(TypedDict):
    id: str
    """Its id, as `spindle.submit` answered it."""
    kind: str
    """The kind."""
    state: str
    """`queued` (committed, not yet admitted), `waiting` (committed, over one of the
    tenant's quotas: it is admitted once the quota allows, never refused for it;
    `message` says which), `admitted` or `refused`.
    """
    submitted_at: str
    """When its transaction called `spindle.submit`."""
    submitted_by: str
    """The database role that submitted it."""


class SubmissionView(_SubmissionViewRequired, total=False):
    """`GET /v1/submissions/{id}`: a submission made with `spindle.submit`."""
    code: Optional[str]
    """Why it was refused: the code `POST /v1/jobs` would have answered."""
    job: Optional[str]
    """The job it made (or the one its idempotency key already named), once admitted."""
    message: Optional[str]
    """What was wrong."""
    violations: Optional[List[ViolationView]]
    """With `invalid-input`: each offending value's JSON pointer and message."""


class _SubmitRequired(TypedDict):
    kind: str
    """The kind to run; the job is pinned to its current version."""


class Submit(_SubmitRequired, total=False):
    """A submission."""
    delay_secs: Optional[float]
    """Run no earlier than this many seconds from now; not with `run_at`."""
    idempotency_key: Optional[str]
    """A second submission with the same key answers the first job (200) instead of a new one."""
    input: Any
    """The job's input: any JSON, at most the host's input cap once encoded."""
    lease_keys: List[str]
    """Exclusive lease keys (e.g. `account:42`): jobs sharing one never run at once."""
    priority: str
    """A priority class, most urgent first."""
    run_at: Optional[str]
    """Run no earlier than this (RFC 3339, UTC); not with `delay_secs`."""


class _TenantListRequired(TypedDict):
    tenants: List[TenantView]
    """The tenants."""


class TenantList(_TenantListRequired, total=False):
    """Every tenant."""
    operator_reads: bool
    """Whether this host lets the operator read tenants' jobs (`operator_reads_tenants`;
    each read audited in the tenant's trail). Absent from older hosts: read as false.
    """


class TenantOutbound(TypedDict, total=False):
    """What a tenant's steps may reach, within the operator's policy."""
    allow: Optional[List[str]]
    """Rules such as `POST https://api.example.com/v1/*`; `null` or empty: nothing.
    Named in every request, `null` included.
    """
    tenant: str
    """The tenant."""


class TenantToken(TypedDict):
    """A tenant and a new token for it. The token is shown this once: only its hash is kept."""
    tenant: str
    """The tenant's name."""
    token: str
    """The bearer token."""


class _TenantViewRequired(TypedDict):
    created_at: str
    """When it was created."""
    name: str
    """Its name."""


class TenantView(_TenantViewRequired, total=False):
    """A tenant."""
    retention_secs: Optional[int]
    """How many seconds its finished jobs are kept; absent: the host's default."""


class TokenList(TypedDict):
    """Tokens, oldest first."""
    tokens: List[TokenView]
    """The tokens."""


class _TokenViewRequired(TypedDict):
    created_at: str
    """When it was made."""
    id: str
    """Its public id."""
    name: str
    """What it is for (`initial` for a tenant's first token, `configured operator token` for
    the one a host is configured with).
    """
    role: str
    """What the token may do: a tenant's work, or managing tenants and tokens."""
    state: str
    """Whether the token works: `active`, or `expired` or `revoked` (either authenticates nothing)."""


class TokenView(_TokenViewRequired, total=False):
    """A token as listed: never the token itself."""
    expires_at: Optional[str]
    """When it stops (or stopped) working, if it expires."""
    minted_by: str
    """Who made it: `tenant` (the tenant itself), `operator` (every use of such a tenant
    token is in the tenant's audit trail), or `creation` (the tenant's first token).
    """
    revoked_at: Optional[str]
    """When it was revoked, if it was."""
    tenant: Optional[str]
    """The tenant it works for; absent for an operator token."""


class _VersionViewRequired(TypedDict):
    created_at: str
    """When it was deployed."""
    digest: str
    """The component's SHA-256."""
    version: int
    """Its number: 1 for the first deploy."""


class VersionView(_VersionViewRequired, total=False):
    """A deployed version."""
    deployment: Optional[DeploymentView]
    size: Optional[int]
    """The component's size in bytes."""
    spec: Optional[SpecView]


class ViolationView(TypedDict):
    """One way a job's input breaks its kind's schema."""
    message: str
    """What is wrong there."""
    pointer: str
    """JSON Pointer (RFC 6901) to the offending value; `""` is the whole input."""


class Withheld(TypedDict):
    """A value the view does not carry, and why."""
    bytes: int
    """The value's size in bytes."""
    reason: str
    """Why a value is not shown."""
