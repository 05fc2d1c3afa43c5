/* spindle.h — write Spindle job kinds in C.
 *
 * A job kind is a WebAssembly component of the `job-kind` world (`wit/job.wit`). This
 * header sits over the bindings wit-bindgen generates for it (`job_kind.h`, from
 * `spindle guest bindgen --lang c`) and over cJSON for JSON, so a kind is a table
 * and its step functions; it never touches the bindings:
 *
 *     #include "spindle.h"
 *
 *     static spindle_outcome compose(spindle_step *step) {
 *         spindle_value input = spindle_object(spindle_input(step));
 *         const char *name = spindle_string(spindle_get(input, "name"));
 *         if (spindle_failed(step)) return spindle_failure(step);   // refused `invalid-input`
 *         cJSON *out = cJSON_CreateObject();
 *         cJSON_AddStringToObject(out, "text", spindle_format("Hello, %s!", name));
 *         return spindle_complete(out);
 *     }
 *
 *     static const spindle_kind greet = {
 *         .name = "greet",
 *         .steps = (const spindle_step_def[]){ {"compose", 1, compose}, {0} },
 *         .retry = {3, 100, 1000},
 *     };
 *     SPINDLE_EXPORT_KIND(greet);
 *
 * Everything here is `static inline` except what SPINDLE_EXPORT_KIND defines, so the
 * header may be included by every file of a kind; the macro goes in exactly one.
 *
 * FAILURES. C has no exceptions, so a step returns one outcome, failures included
 * (`spindle_refused`, `spindle_retryable`). The typed getters over JSON (`spindle_string`,
 * `spindle_int`, ...) cannot return an error, so they record one on the step instead:
 * the first misfit is kept (refused `invalid-input` for the job's input, `invalid-prior`,
 * `missing-prior`, `invalid-cursor`, `invalid-signal`, `invalid-child-output` for the
 * other sources) and the getter returns a harmless default ("" for a string, 0, false),
 * never NULL, so the code after it stays safe. A recorded failure wins over whatever
 * the step then returns — it propagates like an exception would — and a step that
 * wants to stop at once writes `if (spindle_failed(step)) return spindle_failure(step);`.
 * Check it before any side effect. Messages name the place (`name`, `items[2].sku`),
 * never the value, because failure messages are shown to tenants; detail for operators
 * goes to the log (`spindle_with_detail`, `spindle_log_*`).
 *
 * TRAPS. A bug that traps — abort(), assert(), __builtin_trap(), an out-of-bounds
 * access, a stack overflow — ends the call in the sandbox: the host records a
 * `sandbox.*` fault (abort() is `sandbox.panic`, memory errors `sandbox.out-of-bounds`),
 * treats it as retryable while the kind's budget lasts, and keeps the last lines the
 * guest wrote to stderr in the attempt's record (`failure.guest_stderr`). So write why
 * to stderr before aborting. Note that a NULL dereference does not trap in wasm (address
 * 0 is ordinary memory): it reads garbage instead.
 *
 * OWNERSHIP — the rules the bindings impose, and how this header keeps them:
 *  - What an export returns (the kind-spec, a step outcome, a hook's failure) is freed
 *    by the bindings' post-return function with free() once the host has copied it.
 *    Every string and list in it must therefore be malloc'd and never a literal or a
 *    static buffer (job_kind_string_set() there is a double free waiting to happen).
 *    The outcome constructors below copy every string they are given into malloc'd
 *    memory, so pass them anything; the outcome owns the copies until it is returned.
 *  - What the host passes to an export (the step input, the job summary) belongs to
 *    the export. The SDK copies what it hands the kind into the call's arena and frees
 *    the host's memory when the call ends.
 *  - What an import returns (a setting, a prior output, an HMAC) belongs to the caller;
 *    the SDK copies it into the call's arena and frees the original. Import arguments
 *    are only borrowed for the call.
 *  So, for a kind: every pointer a `spindle_*` function returns (strings, bytes, cJSON
 *  nodes, child results) is owned by the current call and stays valid until the step
 *  or hook function returns; never free it, and copy what must outlive the call (nothing
 *  can: see below). Strings are NUL-terminated. A cJSON value handed to
 *  `spindle_complete`, `spindle_more_json`, `spindle_with_cursor_json` or
 *  `spindle_fan_out_add` is consumed (deleted), also when the call fails. cJSON's
 *  printed buffers go to the bindings as they are, so leave cJSON's allocator hooks at
 *  malloc/free (no cJSON_InitHooks). The one exception is an HTTP response
 *  (`spindle_http_send`): it is the caller's, freed with `spindle_http_response_free`,
 *  so that a step making many requests does not hold every body until it returns.
 *  The host instantiates the component afresh for every call: static variables do not
 *  survive between steps or attempts, and an outcome built but not returned merely
 *  leaks until the call ends. What must survive goes in an output or a cursor.
 *
 * Build with `build-kind.sh` (bindgen, clang's wasm32-wasi reactor, componentize); test
 * natively with `spindle_testing.h` and `test-kind.sh`. See README.md.
 */
#ifndef SPINDLE_H
#define SPINDLE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cJSON.h"
#include "job_kind.h"

#if defined(__GNUC__) || defined(__clang__)
#define SPINDLE__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define SPINDLE__PRINTF(fmt, args)
#endif

/* ------------------------------------------------------------------------------------
 * Declaring a kind
 * ---------------------------------------------------------------------------------- */

typedef struct spindle_step spindle_step;
typedef struct spindle_summary spindle_summary;

/* What one call of a step reports. Build it with the constructors below; it owns
 * malloc'd copies of everything in it, which the bindings free once it is returned. */
typedef struct spindle_outcome {
    spindle_job_types_step_outcome_t wit;
    char *detail; /* log-only explanation, see spindle_with_detail; never sent as a failure */
} spindle_outcome;

/* A step function: one call of one step. */
typedef spindle_outcome (*spindle_step_fn)(spindle_step *step);

/* A hook: returns true when it succeeded; on failure it returns
 * `spindle_hook_fail(job, code, ...)` (false). */
typedef bool (*spindle_hook_fn)(spindle_summary *job);

/* One declared step. Steps run in table order. */
typedef struct spindle_step_def {
    const char *key;           /* stable name, unique in the kind */
    uint32_t weight;           /* share of the job's progress; 0 counts as 1 */
    spindle_step_fn run;
    const char *output_schema; /* JSON Schema text the output follows, or NULL */
} spindle_step_def;

/* How the host retries a retryable step: attempts in all (the first included, 1 to
 * 100), backoff from `initial_backoff_ms` (at most an hour) doubling up to
 * `max_backoff_ms` (at most a day). */
typedef struct spindle_retry {
    uint32_t max_attempts;
    uint32_t initial_backoff_ms;
    uint32_t max_backoff_ms;
} spindle_retry;

/* The retry policy a kind gets when it leaves `retry.max_attempts` 0: three attempts,
 * 1 s then 2 s apart (the Rust SDK's default). Kinds with side effects should choose. */
#define SPINDLE_DEFAULT_RETRY ((spindle_retry){3, 1000, 60000})

/* `spindle_kind.flags`. Kinds are not cancellable unless they opt in (as in the other
 * SDKs: a kind says when stopping its jobs midway is safe). */
enum { SPINDLE_CANCELLABLE = 1u << 0 };

/* A kind, as a table:
 *
 *     static const spindle_kind payments = {
 *         .name = "payment-saga",
 *         .steps = (const spindle_step_def[]){
 *             {"authorise", 1, authorise},
 *             {"capture", 3, capture, "{\"type\":\"object\"}"},
 *             {0},                                   // the end of the list
 *         },
 *         .retry = {4, 10, 200},
 *         .input_schema = "{\"type\":\"object\",\"required\":[\"order\"]}",
 *         .on_failure = refund,                      // sets has-failure-effect
 *     };
 *
 * `steps` ends at the first entry whose key is NULL. The hooks, when set, make the spec
 * ask the host for them (has-failure-effect, notifies-on-success). */
typedef struct spindle_kind {
    const char *name;
    const spindle_step_def *steps;
    spindle_retry retry;
    unsigned flags;
    const char *input_schema; /* JSON Schema text a job's input must follow, or NULL */
    spindle_hook_fn on_failure;
    spindle_hook_fn on_success;
} spindle_kind;

/* Exports `kind` (a `spindle_kind` object, not a pointer) as the component's `kind`
 * interface. Once per kind, at file scope. Also defines the call arena. */
#define SPINDLE_EXPORT_KIND(kind)                                                          \
    struct spindle__block *spindle__arena;                                                 \
    void exports_spindle_job_kind_describe(exports_spindle_job_kind_kind_spec_t *ret) {    \
        spindle__describe(&(kind), ret);                                                   \
    }                                                                                      \
    void exports_spindle_job_kind_run_step(exports_spindle_job_kind_step_input_t *input,   \
                                           exports_spindle_job_kind_step_outcome_t *ret) { \
        spindle__run_step(&(kind), input, ret);                                            \
    }                                                                                      \
    bool exports_spindle_job_kind_on_failure(exports_spindle_job_kind_job_summary_t *job,  \
                                             exports_spindle_job_kind_failure_t *err) {    \
        return spindle__run_hook("on-failure", (kind).on_failure, job, err);               \
    }                                                                                      \
    bool exports_spindle_job_kind_on_success(exports_spindle_job_kind_job_summary_t *job,  \
                                             exports_spindle_job_kind_failure_t *err) {    \
        return spindle__run_hook("on-success", (kind).on_success, job, err);               \
    }                                                                                      \
    typedef int spindle__export_needs_a_semicolon

/* ------------------------------------------------------------------------------------
 * Enumerations, with the contract's values
 * ---------------------------------------------------------------------------------- */

typedef enum spindle_log_level {
    SPINDLE_LOG_TRACE = SPINDLE_JOB_TYPES_LOG_LEVEL_TRACE,
    SPINDLE_LOG_DEBUG = SPINDLE_JOB_TYPES_LOG_LEVEL_DEBUG,
    SPINDLE_LOG_INFO = SPINDLE_JOB_TYPES_LOG_LEVEL_INFO,
    SPINDLE_LOG_WARN = SPINDLE_JOB_TYPES_LOG_LEVEL_WARN,
    SPINDLE_LOG_ERROR = SPINDLE_JOB_TYPES_LOG_LEVEL_ERROR,
} spindle_log_level;

/* The host's answer to a heartbeat. */
typedef enum spindle_heartbeat_reply {
    SPINDLE_PROCEED = SPINDLE_JOB_TYPES_HEARTBEAT_REPLY_PROCEED,
    /* The job is being cancelled: stop soon; it settles cancelled whatever the step says. */
    SPINDLE_STOP_CANCELLED = SPINDLE_JOB_TYPES_HEARTBEAT_REPLY_STOP_CANCELLED,
    /* This host lost the job's lease: stop; whatever the step returns is refused. */
    SPINDLE_STOP_LEASE_LOST = SPINDLE_JOB_TYPES_HEARTBEAT_REPLY_STOP_LEASE_LOST,
} spindle_heartbeat_reply;

typedef enum spindle_priority {
    SPINDLE_PRIORITY_CRITICAL = SPINDLE_JOB_TYPES_PRIORITY_CRITICAL,
    SPINDLE_PRIORITY_SCHEDULED = SPINDLE_JOB_TYPES_PRIORITY_SCHEDULED,
    SPINDLE_PRIORITY_NORMAL = SPINDLE_JOB_TYPES_PRIORITY_NORMAL,
    SPINDLE_PRIORITY_BACKGROUND = SPINDLE_JOB_TYPES_PRIORITY_BACKGROUND,
} spindle_priority;

/* What a call follows: nothing (a first call, a `more`), or one of the step's awaits. */
typedef enum spindle_awaited {
    SPINDLE_AWAITED_NOTHING,
    SPINDLE_AWAITED_CHILDREN,
    SPINDLE_AWAITED_SIGNAL,
    SPINDLE_AWAITED_SIGNAL_TIMEOUT,
} spindle_awaited;

typedef enum spindle_child_state {
    SPINDLE_CHILD_OPEN = -1, /* still running: join `any` or `count` was met first */
    SPINDLE_CHILD_SUCCEEDED = SPINDLE_JOB_TYPES_CHILD_STATE_SUCCEEDED,
    SPINDLE_CHILD_FAILED = SPINDLE_JOB_TYPES_CHILD_STATE_FAILED,
    SPINDLE_CHILD_CANCELLED = SPINDLE_JOB_TYPES_CHILD_STATE_CANCELLED,
} spindle_child_state;

/* A child's result, as the step that fanned it out receives it. */
typedef struct spindle_child_result {
    const char *job_id;
    const char *kind;
    spindle_child_state state;
    bool has_output;             /* its last step's output, when it succeeded */
    const uint8_t *output;
    size_t output_len;
    const char *failure_code;    /* why it failed or was cancelled; NULL if it did not */
    const char *failure_message;
} spindle_child_result;

/* `spindle_more`'s total when the amount of work is not known. */
#define SPINDLE_TOTAL_UNKNOWN (-1)

/* ------------------------------------------------------------------------------------
 * Internals: the call arena and the failure a call records
 * ---------------------------------------------------------------------------------- */

/* Everything the SDK hands a kind lives in a list of blocks freed when the call ends. */
struct spindle__block {
    struct spindle__block *next;
    void (*drop)(void *);
    void *object;
};
extern struct spindle__block *spindle__arena; /* defined by SPINDLE_EXPORT_KIND */

/* A step's or a hook's record of the first failure a getter met. */
struct spindle__ctx {
    bool failed;
    bool retryable;
    char *code;    /* arena */
    char *message; /* arena */
    const char *context; /* "step `compose`", "on-failure": for log lines */
};

static inline void *spindle__xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) abort(); /* as the bindings' cabi_realloc does: nothing sensible is left */
    return p;
}

static inline void *spindle__own(void *object, void (*drop)(void *)) {
    struct spindle__block *block = (struct spindle__block *)spindle__xmalloc(sizeof *block);
    block->next = spindle__arena;
    block->drop = drop;
    block->object = object;
    spindle__arena = block;
    return object;
}

static inline void *spindle__alloc(size_t size) {
    return spindle__own(spindle__xmalloc(size), free);
}

static inline void spindle__drop_json(void *json) {
    cJSON_Delete((cJSON *)json);
}

static inline void spindle__arena_release(void) {
    while (spindle__arena) {
        struct spindle__block *block = spindle__arena;
        spindle__arena = block->next;
        if (block->drop) block->drop(block->object);
        free(block);
    }
}

/* An arena copy of `len` bytes with a NUL after them. */
static inline char *spindle__strndup(const void *bytes, size_t len) {
    char *copy = (char *)spindle__alloc(len + 1);
    if (len) memcpy(copy, bytes, len);
    copy[len] = '\0';
    return copy;
}

/* A malloc'd formatted string (the caller frees it). */
static inline char *spindle__vformat_heap(const char *fmt, va_list args) {
    va_list again;
    va_copy(again, args);
    int len = vsnprintf(NULL, 0, fmt ? fmt : "", again);
    va_end(again);
    if (len < 0) len = 0;
    char *text = (char *)spindle__xmalloc((size_t)len + 1);
    vsnprintf(text, (size_t)len + 1, fmt ? fmt : "", args);
    return text;
}

static inline char *spindle__vformat(const char *fmt, va_list args) {
    return (char *)spindle__own(spindle__vformat_heap(fmt, args), free);
}

/* A malloc'd WIT string (what the bindings free after a return); "" takes no memory. */
static inline job_kind_string_t spindle__wit_string(const char *text) {
    job_kind_string_t out = {NULL, 0};
    if (text && *text) job_kind_string_dup(&out, text);
    return out;
}

static inline job_kind_list_u8_t spindle__wit_bytes(const void *bytes, size_t len) {
    job_kind_list_u8_t out = {NULL, len};
    if (len) {
        out.ptr = (uint8_t *)spindle__xmalloc(len);
        memcpy(out.ptr, bytes, len);
    }
    return out;
}

/* A WIT string borrowed from `text` for the length of an import call. */
static inline job_kind_string_t spindle__borrow(const char *text) {
    job_kind_string_t out = {(uint8_t *)(text ? text : ""), text ? strlen(text) : 0};
    return out;
}

static inline void spindle__vfail(struct spindle__ctx *ctx, bool retryable, const char *code, const char *fmt,
                                  va_list args) {
    if (ctx->failed) return; /* the first failure is the one that happened */
    ctx->failed = true;
    ctx->retryable = retryable;
    ctx->code = spindle__strndup(code, strlen(code));
    ctx->message = spindle__vformat(fmt, args);
}

static inline void spindle__fail(struct spindle__ctx *ctx, bool retryable, const char *code, const char *fmt, ...)
    SPINDLE__PRINTF(4, 5);
static inline void spindle__fail(struct spindle__ctx *ctx, bool retryable, const char *code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    spindle__vfail(ctx, retryable, code, fmt, args);
    va_end(args);
}

/* ------------------------------------------------------------------------------------
 * Logs, config, small helpers: usable from steps, hooks and their helpers
 * ---------------------------------------------------------------------------------- */

/* Writes one line to the host's structured log, which tags it with the job and step.
 * The host caps line length and lines per call: log what explains an outcome. */
static inline void spindle_vlog(spindle_log_level level, const char *fmt, va_list args) {
    char *text = spindle__vformat_heap(fmt, args);
    job_kind_string_t message = spindle__borrow(text);
    spindle_job_host_log((spindle_job_host_log_level_t)level, &message);
    free(text);
}

static inline void spindle_log(spindle_log_level level, const char *fmt, ...) SPINDLE__PRINTF(2, 3);
static inline void spindle_log(spindle_log_level level, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    spindle_vlog(level, fmt, args);
    va_end(args);
}

#define SPINDLE__LOG_AT(name, level)                                                \
    static inline void name(const char *fmt, ...) SPINDLE__PRINTF(1, 2);            \
    static inline void name(const char *fmt, ...) {                                 \
        va_list args;                                                               \
        va_start(args, fmt);                                                        \
        spindle_vlog(level, fmt, args);                                             \
        va_end(args);                                                               \
    }
SPINDLE__LOG_AT(spindle_log_trace, SPINDLE_LOG_TRACE)
SPINDLE__LOG_AT(spindle_log_debug, SPINDLE_LOG_DEBUG)
SPINDLE__LOG_AT(spindle_log_info, SPINDLE_LOG_INFO)
SPINDLE__LOG_AT(spindle_log_warn, SPINDLE_LOG_WARN)
SPINDLE__LOG_AT(spindle_log_error, SPINDLE_LOG_ERROR)
#undef SPINDLE__LOG_AT

/* A formatted string owned by the current call. */
static inline const char *spindle_format(const char *fmt, ...) SPINDLE__PRINTF(1, 2);
static inline const char *spindle_format(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    char *text = spindle__vformat(fmt, args);
    va_end(args);
    return text;
}

/* The deployment's setting `name` (`spindle deploy KIND FILE --set NAME=VALUE`), or
 * NULL if it is not set. */
static inline const char *spindle_config_get(const char *name) {
    job_kind_string_t key = spindle__borrow(name), value;
    if (!spindle_job_config_get(&key, &value)) return NULL;
    char *copy = spindle__strndup(value.ptr, value.len);
    job_kind_string_free(&value);
    return copy;
}

/* A placeholder for the tenant's secret `name` (declared at deploy with `--secret NAME@RULE`
 * and set by the tenant), or NULL. The guest never holds the value: put the placeholder
 * in an outbound request's headers and the host swaps the value in when its policy
 * allows the request. It differs between calls: do not store or compare it. */
static inline const char *spindle_config_secret(const char *name) {
    job_kind_string_t key = spindle__borrow(name), value;
    if (!spindle_job_config_secret(&key, &value)) return NULL;
    char *copy = spindle__strndup(value.ptr, value.len);
    job_kind_string_free(&value);
    return copy;
}

/* HMAC-SHA256 of `message` under the tenant's secret `secret_name` into `mac`, for
 * signing a payload without holding the key; false if the secret is not available. */
static inline bool spindle_config_hmac_sha256(const char *secret_name, const void *message, size_t len,
                                              uint8_t mac[32]) {
    job_kind_string_t key = spindle__borrow(secret_name);
    job_kind_list_u8_t body = {(uint8_t *)message, len}, out;
    if (!spindle_job_config_hmac_sha256(&key, &body, &out)) return false;
    bool whole = out.len == 32;
    if (whole) memcpy(mac, out.ptr, 32);
    job_kind_list_u8_free(&out);
    return whole;
}

/* ------------------------------------------------------------------------------------
 * Outcomes
 * ---------------------------------------------------------------------------------- */

static inline spindle_outcome spindle__outcome(uint8_t tag) {
    spindle_outcome outcome;
    memset(&outcome, 0, sizeof outcome);
    outcome.wit.tag = tag;
    return outcome;
}

/* Frees an outcome that will not be returned after all (one that is returned belongs to
 * the bindings). Only needed to keep a call's memory tidy: the instance goes after it. */
static inline void spindle_outcome_free(spindle_outcome *outcome) {
    spindle_job_types_step_outcome_free(&outcome->wit);
    free(outcome->detail);
    *outcome = spindle__outcome(SPINDLE_JOB_TYPES_STEP_OUTCOME_SKIP);
}

static inline spindle_outcome spindle__vfailure(bool retryable, const char *code, const char *fmt, va_list args) {
    spindle_outcome outcome = spindle__outcome(retryable ? SPINDLE_JOB_TYPES_STEP_OUTCOME_RETRYABLE
                                                         : SPINDLE_JOB_TYPES_STEP_OUTCOME_REFUSED);
    spindle_job_types_failure_t *failure = retryable ? &outcome.wit.val.retryable : &outcome.wit.val.refused;
    char *message = spindle__vformat_heap(fmt, args);
    failure->code = spindle__wit_string(code);
    failure->message = spindle__wit_string(*message ? message : code); /* a bare code still reads */
    free(message);
    return outcome;
}

/* A transient failure: the host retries with backoff while the kind's budget lasts. The
 * code and message are shown to tenants: keep secrets and transient detail out of them. */
static inline spindle_outcome spindle_retryable(const char *code, const char *fmt, ...) SPINDLE__PRINTF(2, 3);
static inline spindle_outcome spindle_retryable(const char *code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    spindle_outcome outcome = spindle__vfailure(true, code, fmt, args);
    va_end(args);
    return outcome;
}

/* A permanent failure: the step and the job fail without retry. */
static inline spindle_outcome spindle_refused(const char *code, const char *fmt, ...) SPINDLE__PRINTF(2, 3);
static inline spindle_outcome spindle_refused(const char *code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    spindle_outcome outcome = spindle__vfailure(false, code, fmt, args);
    va_end(args);
    return outcome;
}

/* The step finished with raw `output` bytes (not necessarily JSON), copied. */
static inline spindle_outcome spindle_complete_bytes(const void *output, size_t len) {
    spindle_outcome outcome = spindle__outcome(SPINDLE_JOB_TYPES_STEP_OUTCOME_COMPLETE);
    outcome.wit.val.complete = spindle__wit_bytes(output, len);
    return outcome;
}

/* The step finished with `output` as JSON, handed to later steps. Consumes `output`;
 * NULL (a cJSON constructor that ran out of memory) is refused `invalid-output`. */
static inline spindle_outcome spindle_complete(cJSON *output) {
    char *text = output ? cJSON_PrintUnformatted(output) : NULL;
    cJSON_Delete(output);
    if (!text) return spindle_refused("invalid-output", "the step's output is not serialisable as JSON");
    spindle_outcome outcome = spindle__outcome(SPINDLE_JOB_TYPES_STEP_OUTCOME_COMPLETE);
    /* cJSON's buffer is malloc'd: the bindings free it after the return. */
    outcome.wit.val.complete.ptr = (uint8_t *)text;
    outcome.wit.val.complete.len = strlen(text);
    return outcome;
}

/* The step does not apply to this job; the reason is shown to operators. */
static inline spindle_outcome spindle_skip(const char *fmt, ...) SPINDLE__PRINTF(1, 2);
static inline spindle_outcome spindle_skip(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    char *reason = spindle__vformat_heap(fmt, args);
    va_end(args);
    spindle_outcome outcome = spindle__outcome(SPINDLE_JOB_TYPES_STEP_OUTCOME_SKIP);
    outcome.wit.val.skip = spindle__wit_string(reason);
    free(reason);
    return outcome;
}

/* Progress saved: the host calls the step again (same attempt) with `cursor`. `done`
 * and `total` are units of work; `total` is SPINDLE_TOTAL_UNKNOWN when not known. */
static inline spindle_outcome spindle_more(const char *cursor, uint64_t done, int64_t total) {
    spindle_outcome outcome = spindle__outcome(SPINDLE_JOB_TYPES_STEP_OUTCOME_MORE);
    outcome.wit.val.more.cursor = spindle__wit_string(cursor);
    outcome.wit.val.more.done = done;
    outcome.wit.val.more.total.is_some = total >= 0;
    outcome.wit.val.more.total.val = total >= 0 ? (uint64_t)total : 0;
    return outcome;
}

/* `spindle_more` with a JSON cursor (consumed); read it back with spindle_cursor_value. */
static inline spindle_outcome spindle_more_json(cJSON *cursor, uint64_t done, int64_t total) {
    char *text = cursor ? cJSON_PrintUnformatted(cursor) : NULL;
    cJSON_Delete(cursor);
    if (!text) return spindle_refused("invalid-cursor", "the step's cursor is not serialisable as JSON");
    spindle_outcome outcome = spindle_more(text, done, total);
    free(text);
    return outcome;
}

/* Call the step again after `seconds`; no attempt is consumed. */
static inline spindle_outcome spindle_snooze(uint32_t seconds) {
    spindle_outcome outcome = spindle__outcome(SPINDLE_JOB_TYPES_STEP_OUTCOME_SNOOZE);
    outcome.wit.val.snooze = seconds;
    return outcome;
}

/* Parks the step until the signal `name` is sent to the job or `timeout_secs` pass, then
 * calls it again (same attempt): see spindle_signal and spindle_signal_timed_out. */
static inline spindle_outcome spindle_await_signal(const char *name, uint32_t timeout_secs) {
    spindle_outcome outcome = spindle__outcome(SPINDLE_JOB_TYPES_STEP_OUTCOME_AWAIT_SIGNAL);
    outcome.wit.val.await_signal.name = spindle__wit_string(name);
    outcome.wit.val.await_signal.timeout_secs = timeout_secs;
    return outcome;
}

/* Sets the cursor the step is called again with, on an await outcome or a `more`
 * (whose cursor it replaces). Other outcomes carry no cursor and come back unchanged. */
static inline spindle_outcome spindle_with_cursor(spindle_outcome outcome, const char *cursor) {
    job_kind_option_string_t *slot = NULL;
    switch (outcome.wit.tag) {
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_MORE:
        job_kind_string_free(&outcome.wit.val.more.cursor);
        outcome.wit.val.more.cursor = spindle__wit_string(cursor);
        return outcome;
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_AWAIT_CHILDREN: slot = &outcome.wit.val.await_children.cursor; break;
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_AWAIT_SIGNAL: slot = &outcome.wit.val.await_signal.cursor; break;
    default: return outcome;
    }
    job_kind_option_string_free(slot);
    slot->is_some = true;
    slot->val = spindle__wit_string(cursor);
    return outcome;
}

/* `spindle_with_cursor` with a JSON cursor (consumed); one cJSON cannot print makes the
 * outcome a refusal `invalid-cursor`. */
static inline spindle_outcome spindle_with_cursor_json(spindle_outcome outcome, cJSON *cursor) {
    char *text = cursor ? cJSON_PrintUnformatted(cursor) : NULL;
    cJSON_Delete(cursor);
    if (!text) {
        spindle_outcome_free(&outcome);
        return spindle_refused("invalid-cursor", "the step's cursor is not serialisable as JSON");
    }
    outcome = spindle_with_cursor(outcome, text);
    free(text);
    return outcome;
}

/* Attaches detail for the host log (an upstream error, an id, a value): logged when the
 * outcome is a failure, in place of its message; it never reaches the job's record. */
static inline spindle_outcome spindle_with_detail(spindle_outcome outcome, const char *fmt, ...) SPINDLE__PRINTF(2, 3);
static inline spindle_outcome spindle_with_detail(spindle_outcome outcome, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    free(outcome.detail);
    outcome.detail = spindle__vformat_heap(fmt, args);
    va_end(args);
    return outcome;
}

/* ------------------------------------------------------------------------------------
 * Outbound HTTP: one request out, the whole response back (wasi:http/outgoing-handler)
 *
 *     const char *token = spindle_config_secret("api-token");   // a placeholder, or NULL
 *     spindle_http_request request = {
 *         .method = "POST",
 *         .url = "https://api.example.com/v1/hooks",
 *         .headers = (const spindle_http_header[]){
 *             {"content-type", "application/json"},
 *             {"authorization", token ? spindle_format("Bearer %s", token) : NULL},  // NULL: left out
 *         },
 *         .header_count = 2,
 *         .body = text,
 *         .body_len = strlen(text),
 *     };
 *     spindle_http_response response;
 *     spindle_http_error err = spindle_http_send(&request, &response);
 *     if (err) return spindle_http_failure(err, &response);        // refused or retryable
 *     if (response.status >= 400) {
 *         spindle_outcome failure = spindle_http_status_failure(&response);
 *         spindle_http_response_free(&response);
 *         return failure;
 *     }
 *     ... response.body, response.body_len, spindle_http_response_header(&response, "etag")
 *     spindle_http_response_free(&response);
 *
 * The host's policy denies every request unless the operator, the tenant and the
 * kind's deployment all allow its destination (`spindle deploy ... --allow 'POST
 * https://api.example.com/v1/hooks'`); a denied request never leaves the host. The host
 * also bounds each phase's time, the response body's size and the requests one call may
 * make, so there are no timeouts to set here. Unless a request has an `Idempotency-Key`
 * header, the host adds one that is stable across the step's attempts. Credentials go
 * in headers as the placeholders spindle_config_secret returns: the host puts the
 * values in place once the policy allowed the request, and the guest never holds them.
 * ---------------------------------------------------------------------------------- */

/* One header. Names compare ASCII case-insensitively; a value is text. */
typedef struct spindle_http_header {
    const char *name;
    const char *value; /* in a request, NULL leaves the header out */
} spindle_http_header;

/* An outbound request. Everything in it is only read, during spindle_http_send. */
typedef struct spindle_http_request {
    const char *method; /* "GET", "POST", ... (NULL is GET); known ones case-insensitively */
    const char *url;    /* `http://` or `https://`, host[:port], path and query; no `user@` */
    const spindle_http_header *headers;
    size_t header_count;
    const void *body;   /* body_len bytes; none when body_len is 0 */
    size_t body_len;
    /* Most response-body bytes to take (0: SPINDLE_HTTP_MAX_RESPONSE_BYTES); more is
     * SPINDLE_HTTP_TOO_LARGE. */
    size_t max_response_bytes;
} spindle_http_request;

/* The most response-body bytes spindle_http_send takes unless the request says: the
 * host's own default cap. The body is held whole in the instance's memory, where an
 * allocation that fails is an abort, so a step that expects small answers should say
 * so with `max_response_bytes`: a larger one is then a typed error, not a trap. */
#define SPINDLE_HTTP_MAX_RESPONSE_BYTES ((size_t)16 * 1024 * 1024)

/* What a response holds: malloc'd, the caller's until spindle_http_response_free. */
typedef struct spindle_http_response {
    uint16_t status;
    spindle_http_header *headers; /* as received (names lower-case), NUL-terminated */
    size_t header_count;
    char *body;                   /* body_len bytes and a NUL after them; never NULL on success */
    size_t body_len;
    /* On an error, why, for the log (the wasi:http error code and its cause, say
     * `HTTP-request-denied` or `DNS-error (NXDOMAIN)`); "" otherwise. */
    char error_detail[160];
} spindle_http_response;

/* Why a request got no response. A response, whatever its status, is not an error
 * here (see spindle_http_status_failure). spindle_http_failure makes each an outcome:
 * DENIED and INVALID_REQUEST are refused (the same request fails the same way again),
 * the rest retryable `upstream-unavailable`, as in the other SDKs. */
typedef enum spindle_http_error {
    SPINDLE_HTTP_OK = 0,
    /* The host's policy refused the request (`HTTP-request-denied`): its destination
     * is not allowed, or the call made more requests than the host allows one call. */
    SPINDLE_HTTP_DENIED,
    /* The request cannot be sent as built: a malformed URL, method or header, a header
     * a guest may not set (`host`, `transfer-encoding`, ...). */
    SPINDLE_HTTP_INVALID_REQUEST,
    /* A phase ran out of time: DNS, connect, first byte, between bytes, the whole. */
    SPINDLE_HTTP_TIMEOUT,
    /* The response body is larger than max_response_bytes or the host's cap. */
    SPINDLE_HTTP_TOO_LARGE,
    /* The host has as many outbound connections open as it allows. */
    SPINDLE_HTTP_CONNECTION_LIMIT,
    /* The destination could not be reached, or its TLS was wrong. */
    SPINDLE_HTTP_CONNECT_FAILED,
    /* Anything else: a protocol error, a body cut short, an error inside the host. */
    SPINDLE_HTTP_OTHER,
} spindle_http_error;

/* The error's name: "ok", "denied", "invalid-request", "timeout", "too-large",
 * "connection-limit", "connect-failed" or "other". */
static inline const char *spindle_http_error_name(spindle_http_error err) {
    static const char *const names[] = {"ok",        "denied",           "invalid-request", "timeout",
                                        "too-large", "connection-limit", "connect-failed",  "other"};
    return (unsigned)err < sizeof names / sizeof *names ? names[err] : "other";
}

/* The outcome an error means: refused `http-request-denied` or `http-request-invalid`,
 * else retryable `upstream-unavailable`. The message is fixed (tenants see it); the
 * response's error_detail, when `response` is given, goes to the log only. */
static inline spindle_outcome spindle_http_failure(spindle_http_error err, const spindle_http_response *response) {
    spindle_outcome outcome;
    switch (err) {
    case SPINDLE_HTTP_DENIED:
        outcome = spindle_refused("http-request-denied", "the outbound request is not allowed by policy");
        break;
    case SPINDLE_HTTP_INVALID_REQUEST:
        outcome = spindle_refused("http-request-invalid", "the outbound request is malformed");
        break;
    case SPINDLE_HTTP_OK: return spindle_refused("no-failure", "the step reported an HTTP failure that did not happen");
    default: outcome = spindle_retryable("upstream-unavailable", "the upstream service did not answer"); break;
    }
    const char *detail = response && response->error_detail[0] ? response->error_detail : "";
    return spindle_with_detail(outcome, "%s%s%s", spindle_http_error_name(err), *detail ? ": " : "", detail);
}

/* The outcome an error status means: 429 and 5xx retryable (the upstream may recover),
 * other 4xx refused (the same request would be rejected again), code `upstream-<status>`.
 * The body stays out of it. A status below 400 is no failure: refused `no-failure`. */
static inline spindle_outcome spindle_http_status_failure(const spindle_http_response *response) {
    unsigned status = response->status;
    char code[24];
    snprintf(code, sizeof code, "upstream-%u", status);
    if (status == 429 || (status >= 500 && status <= 599))
        return spindle_retryable(code, "the upstream service answered %u; retrying later", status);
    if (status >= 400 && status <= 499)
        return spindle_refused(code, "the upstream service rejected the request (%u)", status);
    return spindle_refused("no-failure", "the step reported status %u as a failure", status);
}

/* Whether `name` (`len` bytes) and the NUL-terminated `other` are the same ASCII
 * case-insensitively. */
static inline bool spindle__http_same_name(const char *name, size_t len, const char *other) {
    for (size_t i = 0; i < len; i++, other++) {
        char a = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] | 0x20) : name[i];
        char b = *other >= 'A' && *other <= 'Z' ? (char)(*other | 0x20) : *other;
        if (!*other || a != b) return false;
    }
    return *other == '\0';
}

/* The first value of the response's header `name` (ASCII case-insensitive), or NULL. */
static inline const char *spindle_http_response_header(const spindle_http_response *response, const char *name) {
    for (size_t i = 0; i < response->header_count; i++)
        if (spindle__http_same_name(response->headers[i].name, strlen(response->headers[i].name), name))
            return response->headers[i].value;
    return NULL;
}

/* Frees what a response holds and empties it; safe on an empty or freed one. */
static inline void spindle_http_response_free(spindle_http_response *response) {
    for (size_t i = 0; i < response->header_count; i++) {
        free((char *)response->headers[i].name);
        free((char *)response->headers[i].value);
    }
    free(response->headers);
    free(response->body);
    memset(response, 0, sizeof *response);
}

/* Internals of spindle_http_send. Every resource is dropped on every path, children
 * first (a pollable before its future, a stream before its body): the host traps a
 * guest that drops a parent while a child lives. */

/* Bytes per blocking-write-and-flush: WASI output streams take at most 4096 per call. */
#define SPINDLE__HTTP_WRITE_CHUNK 4096
/* Bytes asked for per blocking-read. */
#define SPINDLE__HTTP_READ_CHUNK (64 * 1024)

static inline spindle_http_error spindle__http_fail(spindle_http_response *response, spindle_http_error err,
                                                    const char *fmt, ...) SPINDLE__PRINTF(3, 4);
static inline spindle_http_error spindle__http_fail(spindle_http_response *response, spindle_http_error err,
                                                    const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(response->error_detail, sizeof response->error_detail, fmt, args);
    va_end(args);
    return err;
}

/* Frees what an error code holds: only strings, in the cases below. (The generated
 * wasi_http_types_error_code_free leaves these option<string> payloads allocated, so
 * it is not used.) */
static inline void spindle__http_code_free(wasi_http_types_error_code_t *code) {
    job_kind_option_string_t *text = NULL;
    switch (code->tag) {
    case WASI_HTTP_TYPES_ERROR_CODE_DNS_ERROR: text = &code->val.dns_error.rcode; break;
    case WASI_HTTP_TYPES_ERROR_CODE_TLS_ALERT_RECEIVED: text = &code->val.tls_alert_received.alert_message; break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_HEADER_SIZE:
        if (code->val.http_request_header_size.is_some) text = &code->val.http_request_header_size.val.field_name;
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_TRAILER_SIZE:
        text = &code->val.http_request_trailer_size.field_name;
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_HEADER_SIZE:
        text = &code->val.http_response_header_size.field_name;
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TRAILER_SIZE:
        text = &code->val.http_response_trailer_size.field_name;
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TRANSFER_CODING: text = &code->val.http_response_transfer_coding; break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_CONTENT_CODING: text = &code->val.http_response_content_coding; break;
    case WASI_HTTP_TYPES_ERROR_CODE_INTERNAL_ERROR: text = &code->val.internal_error; break;
    default: break;
    }
    if (text && text->is_some) job_kind_string_free(&text->val);
    code->tag = WASI_HTTP_TYPES_ERROR_CODE_DNS_TIMEOUT; /* nothing left to free */
}

/* A wasi:http error code as the error a step acts on, named as the host's records name
 * it; frees the code. */
static inline spindle_http_error spindle__http_code(spindle_http_response *response,
                                                    wasi_http_types_error_code_t *code) {
    /* By the error-code case's index in wasi:http/types, its name as the host's
     * records spell it and the error it means. */
    static const struct {
        const char *name;
        spindle_http_error error;
    } cases[] = {
        {"DNS-timeout", SPINDLE_HTTP_TIMEOUT},
        {"DNS-error", SPINDLE_HTTP_CONNECT_FAILED},
        {"destination-not-found", SPINDLE_HTTP_CONNECT_FAILED},
        {"destination-unavailable", SPINDLE_HTTP_CONNECT_FAILED},
        {"destination-IP-prohibited", SPINDLE_HTTP_DENIED},
        {"destination-IP-unroutable", SPINDLE_HTTP_CONNECT_FAILED},
        {"connection-refused", SPINDLE_HTTP_CONNECT_FAILED},
        {"connection-terminated", SPINDLE_HTTP_CONNECT_FAILED},
        {"connection-timeout", SPINDLE_HTTP_TIMEOUT},
        {"connection-read-timeout", SPINDLE_HTTP_TIMEOUT},
        {"connection-write-timeout", SPINDLE_HTTP_TIMEOUT},
        {"connection-limit-reached", SPINDLE_HTTP_CONNECTION_LIMIT},
        {"TLS-protocol-error", SPINDLE_HTTP_CONNECT_FAILED},
        {"TLS-certificate-error", SPINDLE_HTTP_CONNECT_FAILED},
        {"TLS-alert-received", SPINDLE_HTTP_CONNECT_FAILED},
        {"HTTP-request-denied", SPINDLE_HTTP_DENIED},
        {"HTTP-request-length-required", SPINDLE_HTTP_INVALID_REQUEST},
        {"HTTP-request-body-size", SPINDLE_HTTP_INVALID_REQUEST},
        {"HTTP-request-method-invalid", SPINDLE_HTTP_INVALID_REQUEST},
        {"HTTP-request-URI-invalid", SPINDLE_HTTP_INVALID_REQUEST},
        {"HTTP-request-URI-too-long", SPINDLE_HTTP_INVALID_REQUEST},
        {"HTTP-request-header-section-size", SPINDLE_HTTP_INVALID_REQUEST},
        {"HTTP-request-header-size", SPINDLE_HTTP_INVALID_REQUEST},
        {"HTTP-request-trailer-section-size", SPINDLE_HTTP_INVALID_REQUEST},
        {"HTTP-request-trailer-size", SPINDLE_HTTP_INVALID_REQUEST},
        {"HTTP-response-incomplete", SPINDLE_HTTP_OTHER},
        {"HTTP-response-header-section-size", SPINDLE_HTTP_OTHER},
        {"HTTP-response-header-size", SPINDLE_HTTP_OTHER},
        {"HTTP-response-body-size", SPINDLE_HTTP_TOO_LARGE},
        {"HTTP-response-trailer-section-size", SPINDLE_HTTP_OTHER},
        {"HTTP-response-trailer-size", SPINDLE_HTTP_OTHER},
        {"HTTP-response-transfer-coding", SPINDLE_HTTP_OTHER},
        {"HTTP-response-content-coding", SPINDLE_HTTP_OTHER},
        {"HTTP-response-timeout", SPINDLE_HTTP_TIMEOUT},
        {"HTTP-upgrade-failed", SPINDLE_HTTP_OTHER},
        {"HTTP-protocol-error", SPINDLE_HTTP_OTHER},
        {"loop-detected", SPINDLE_HTTP_OTHER},
        {"configuration-error", SPINDLE_HTTP_OTHER},
        {"internal-error", SPINDLE_HTTP_OTHER},
    };
    const job_kind_option_string_t *cause = NULL;
    switch (code->tag) {
    case WASI_HTTP_TYPES_ERROR_CODE_DNS_ERROR: cause = &code->val.dns_error.rcode; break;
    case WASI_HTTP_TYPES_ERROR_CODE_TLS_ALERT_RECEIVED: cause = &code->val.tls_alert_received.alert_message; break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TRANSFER_CODING:
        cause = &code->val.http_response_transfer_coding;
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_CONTENT_CODING:
        cause = &code->val.http_response_content_coding;
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_INTERNAL_ERROR: cause = &code->val.internal_error; break;
    default: break;
    }
    bool known = code->tag < sizeof cases / sizeof *cases;
    spindle_http_error err = known ? cases[code->tag].error : SPINDLE_HTTP_OTHER;
    const char *name = known ? cases[code->tag].name : "unknown error code";
    if (cause && cause->is_some)
        spindle__http_fail(response, err, "%s (%.*s)", name, (int)cause->val.len, (const char *)cause->val.ptr);
    else
        spindle__http_fail(response, err, "%s", name);
    spindle__http_code_free(code);
    return err;
}

/* A stream's failure as the HTTP error behind it, when the host says which; drops the
 * I/O error it carries. */
static inline spindle_http_error spindle__http_stream_error(spindle_http_response *response,
                                                            wasi_io_streams_stream_error_t *failure,
                                                            const char *what) {
    if (failure->tag == WASI_IO_STREAMS_STREAM_ERROR_CLOSED)
        return spindle__http_fail(response, SPINDLE_HTTP_OTHER, "the %s stream closed early", what);
    wasi_io_error_own_error_t io = failure->val.last_operation_failed;
    wasi_http_types_error_code_t code;
    spindle_http_error err;
    if (wasi_http_types_http_error_code(wasi_io_error_borrow_error(io), &code)) {
        err = spindle__http_code(response, &code);
    } else {
        job_kind_string_t text;
        wasi_io_error_method_error_to_debug_string(wasi_io_error_borrow_error(io), &text);
        err = spindle__http_fail(response, SPINDLE_HTTP_OTHER, "%s: %.*s", what, (int)text.len, (const char *)text.ptr);
        job_kind_string_free(&text);
    }
    wasi_io_error_error_drop_own(io);
    return err;
}

/* Splits `scheme://authority/path?query#fragment` the way wasi:http takes a URL: only
 * as much parsing as that needs, since the host checks the destination against its
 * policy anyway. On success `*owned` (malloc'd) holds the lower-cased scheme and the
 * path (`/` when the URL has none, the fragment dropped) the strings point into. */
static inline spindle_http_error spindle__http_split(spindle_http_response *response, const char *url,
                                                     job_kind_string_t *scheme, job_kind_string_t *authority,
                                                     job_kind_string_t *path, char **owned) {
    *owned = NULL;
    if (!url) return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST, "no URL");
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST,
                                      "the URL contains whitespace or control characters");
    const char *sep = strstr(url, "://");
    if (!sep)
        return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST,
                                  "the URL has no scheme (expected `http://` or `https://`)");
    size_t scheme_len = (size_t)(sep - url);
    if (!scheme_len) return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST, "the URL's scheme is empty");
    for (size_t i = 0; i < scheme_len; i++) {
        char c = url[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
                  c == '-' || c == '.';
        if (!ok) return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST, "the URL's scheme is malformed");
    }
    const char *host = sep + 3;
    size_t host_len = strcspn(host, "/?#");
    if (!host_len) return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST, "the URL has no host");
    /* The host would pass credentials on in the clear and log them with the URL. */
    if (memchr(host, '@', host_len))
        return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST,
                                  "the URL carries credentials (put them in a header)");
    const char *rest = host + host_len;
    size_t rest_len = strcspn(rest, "#");
    char *text = (char *)spindle__xmalloc(scheme_len + rest_len + 2);
    for (size_t i = 0; i < scheme_len; i++) text[i] = url[i] >= 'A' && url[i] <= 'Z' ? (char)(url[i] | 0x20) : url[i];
    char *p = text + scheme_len;
    size_t p_len = 0;
    if (rest[0] != '/') p[p_len++] = '/';
    memcpy(p + p_len, rest, rest_len);
    p_len += rest_len;
    scheme->ptr = (uint8_t *)text;
    scheme->len = scheme_len;
    authority->ptr = (uint8_t *)host;
    authority->len = host_len;
    path->ptr = (uint8_t *)p;
    path->len = p_len;
    *owned = text;
    return SPINDLE_HTTP_OK;
}

/* The request's headers as wasi:http fields, with the body's length when it has one. */
static inline spindle_http_error spindle__http_fields(spindle_http_response *response,
                                                      const spindle_http_request *request,
                                                      wasi_http_types_own_fields_t *out) {
    wasi_http_types_own_fields_t fields = wasi_http_types_constructor_fields();
    wasi_http_types_borrow_fields_t borrowed = wasi_http_types_borrow_fields(fields);
    bool has_length = false;
    for (size_t i = 0; i < request->header_count; i++) {
        const spindle_http_header *header = &request->headers[i];
        if (!header->name || !*header->name) {
            wasi_http_types_fields_drop_own(fields);
            return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST, "header %zu has no name", i);
        }
        if (!header->value) continue;
        has_length = has_length || spindle__http_same_name("content-length", 14, header->name);
        wasi_http_types_field_name_t name = spindle__borrow(header->name);
        wasi_http_types_field_value_t value = {(uint8_t *)header->value, strlen(header->value)};
        wasi_http_types_header_error_t problem;
        if (!wasi_http_types_method_fields_append(borrowed, &name, &value, &problem)) {
            wasi_http_types_fields_drop_own(fields);
            return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST, "header `%.60s` %s", header->name,
                                      problem.tag == WASI_HTTP_TYPES_HEADER_ERROR_FORBIDDEN ? "may not be set by a guest"
                                      : problem.tag == WASI_HTTP_TYPES_HEADER_ERROR_IMMUTABLE ? "cannot be changed"
                                                                                               : "is malformed");
        }
    }
    /* The body's size is known: say it, so the host sends it whole, never chunked (a
     * server that does not read chunked bodies gets it all the same). */
    if (request->body_len && !has_length) {
        char length[24];
        snprintf(length, sizeof length, "%zu", request->body_len);
        wasi_http_types_field_name_t name = spindle__borrow("content-length");
        wasi_http_types_field_value_t value = {(uint8_t *)length, strlen(length)};
        wasi_http_types_header_error_t problem;
        if (!wasi_http_types_method_fields_append(borrowed, &name, &value, &problem)) {
            wasi_http_types_fields_drop_own(fields);
            return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST,
                                      "the host does not let the request say its content-length");
        }
    }
    *out = fields;
    return SPINDLE_HTTP_OK;
}

/* The outgoing request: headers (taken over), method, scheme, authority, path. */
static inline spindle_http_error spindle__http_outgoing(spindle_http_response *response,
                                                        const spindle_http_request *request,
                                                        wasi_http_types_own_outgoing_request_t *out) {
    job_kind_string_t scheme, authority, path;
    char *owned;
    spindle_http_error err = spindle__http_split(response, request->url, &scheme, &authority, &path, &owned);
    if (err) return err;
    wasi_http_types_own_fields_t fields;
    err = spindle__http_fields(response, request, &fields);
    if (err) {
        free(owned);
        return err;
    }
    wasi_http_types_own_outgoing_request_t outgoing = wasi_http_types_constructor_outgoing_request(fields);
    wasi_http_types_borrow_outgoing_request_t borrowed = wasi_http_types_borrow_outgoing_request(outgoing);

    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    const char *given = request->method && *request->method ? request->method : "GET";
    wasi_http_types_method_t method;
    method.tag = WASI_HTTP_TYPES_METHOD_OTHER;
    method.val.other = spindle__borrow(given);
    for (uint8_t i = 0; i < sizeof methods / sizeof *methods; i++)
        if (spindle__http_same_name(given, strlen(given), methods[i])) method.tag = i; /* GET is 0, ... PATCH 8 */
    wasi_http_types_scheme_t wit_scheme;
    wit_scheme.tag = WASI_HTTP_TYPES_SCHEME_OTHER;
    wit_scheme.val.other = scheme;
    if (scheme.len == 4 && memcmp(scheme.ptr, "http", 4) == 0) wit_scheme.tag = WASI_HTTP_TYPES_SCHEME_HTTP;
    if (scheme.len == 5 && memcmp(scheme.ptr, "https", 5) == 0) wit_scheme.tag = WASI_HTTP_TYPES_SCHEME_HTTPS;

    const char *wrong = !wasi_http_types_method_outgoing_request_set_method(borrowed, &method)        ? "method"
                        : !wasi_http_types_method_outgoing_request_set_scheme(borrowed, &wit_scheme) ? "scheme"
                        : !wasi_http_types_method_outgoing_request_set_authority(borrowed, &authority) ? "host"
                        : !wasi_http_types_method_outgoing_request_set_path_with_query(borrowed, &path) ? "path"
                                                                                                         : NULL;
    free(owned);
    if (wrong) {
        wasi_http_types_outgoing_request_drop_own(outgoing);
        return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST, "the request's %s is not valid", wrong);
    }
    *out = outgoing;
    return SPINDLE_HTTP_OK;
}

/* Writes the body in chunks the stream takes; drops the stream, not the body. */
static inline spindle_http_error spindle__http_write(spindle_http_response *response,
                                                     wasi_http_types_own_outgoing_body_t body, const uint8_t *bytes,
                                                     size_t len) {
    wasi_http_types_own_output_stream_t stream;
    if (!wasi_http_types_method_outgoing_body_write(wasi_http_types_borrow_outgoing_body(body), &stream))
        return spindle__http_fail(response, SPINDLE_HTTP_OTHER, "the request body stream was already taken");
    spindle_http_error err = SPINDLE_HTTP_OK;
    for (size_t at = 0; at < len && !err; at += SPINDLE__HTTP_WRITE_CHUNK) {
        size_t left = len - at;
        job_kind_list_u8_t chunk = {(uint8_t *)bytes + at, left < SPINDLE__HTTP_WRITE_CHUNK ? left : SPINDLE__HTTP_WRITE_CHUNK};
        wasi_io_streams_stream_error_t failure;
        if (!wasi_io_streams_method_output_stream_blocking_write_and_flush(wasi_io_streams_borrow_output_stream(stream),
                                                                           &chunk, &failure))
            err = spindle__http_stream_error(response, &failure, "request body");
    }
    wasi_io_streams_output_stream_drop_own(stream);
    return err;
}

/* Blocks until the response's head arrives or the request fails; drops the future. */
static inline spindle_http_error spindle__http_wait(spindle_http_response *response,
                                                    wasi_http_types_own_future_incoming_response_t future,
                                                    wasi_http_types_own_incoming_response_t *out) {
    wasi_http_types_borrow_future_incoming_response_t borrowed = wasi_http_types_borrow_future_incoming_response(future);
    wasi_http_types_result_result_own_incoming_response_error_code_void_t ready;
    while (!wasi_http_types_method_future_incoming_response_get(borrowed, &ready)) {
        wasi_http_types_own_pollable_t pollable = wasi_http_types_method_future_incoming_response_subscribe(borrowed);
        wasi_io_poll_method_pollable_block(wasi_io_poll_borrow_pollable(pollable));
        wasi_io_poll_pollable_drop_own(pollable);
    }
    wasi_http_types_future_incoming_response_drop_own(future);
    if (ready.is_err) return spindle__http_fail(response, SPINDLE_HTTP_OTHER, "the response was already taken");
    if (ready.val.ok.is_err) return spindle__http_code(response, &ready.val.ok.val.err);
    *out = ready.val.ok.val.ok;
    return SPINDLE_HTTP_OK;
}

/* Copies the response's headers; drops the fields. */
static inline void spindle__http_headers(spindle_http_response *response,
                                         wasi_http_types_borrow_incoming_response_t incoming) {
    wasi_http_types_own_headers_t fields = wasi_http_types_method_incoming_response_headers(incoming);
    wasi_http_types_list_tuple2_field_name_field_value_t entries;
    wasi_http_types_method_fields_entries(wasi_http_types_borrow_fields(fields), &entries);
    wasi_http_types_fields_drop_own(fields);
    response->headers = (spindle_http_header *)spindle__xmalloc(entries.len * sizeof *response->headers);
    for (size_t i = 0; i < entries.len; i++) {
        const wasi_http_types_tuple2_field_name_field_value_t *entry = &entries.ptr[i];
        char *name = (char *)spindle__xmalloc(entry->f0.len + 1), *value = (char *)spindle__xmalloc(entry->f1.len + 1);
        if (entry->f0.len) memcpy(name, entry->f0.ptr, entry->f0.len);
        if (entry->f1.len) memcpy(value, entry->f1.ptr, entry->f1.len);
        name[entry->f0.len] = value[entry->f1.len] = '\0';
        response->headers[i].name = name;
        response->headers[i].value = value;
    }
    response->header_count = entries.len;
    wasi_http_types_list_tuple2_field_name_field_value_free(&entries);
}

/* Reads the body to its end or past `limit`; the host fails the read once the body
 * passes its own cap. Trailers are not read. Drops the stream and the body. */
static inline spindle_http_error spindle__http_read(spindle_http_response *response,
                                                    wasi_http_types_borrow_incoming_response_t incoming, size_t limit) {
    wasi_http_types_own_incoming_body_t body;
    if (!wasi_http_types_method_incoming_response_consume(incoming, &body))
        return spindle__http_fail(response, SPINDLE_HTTP_OTHER, "the response body was already taken");
    wasi_http_types_own_input_stream_t stream;
    if (!wasi_http_types_method_incoming_body_stream(wasi_http_types_borrow_incoming_body(body), &stream)) {
        wasi_http_types_incoming_body_drop_own(body);
        return spindle__http_fail(response, SPINDLE_HTTP_OTHER, "the response body stream was already taken");
    }
    char *bytes = (char *)spindle__xmalloc(1);
    size_t len = 0, capacity = 1;
    spindle_http_error err = SPINDLE_HTTP_OK;
    for (;;) {
        /* One byte past the limit is enough to know the body is too large. */
        size_t room = limit - len;
        uint64_t ask = room < SPINDLE__HTTP_READ_CHUNK ? (uint64_t)room + 1 : SPINDLE__HTTP_READ_CHUNK;
        job_kind_list_u8_t chunk;
        wasi_io_streams_stream_error_t failure;
        if (!wasi_io_streams_method_input_stream_blocking_read(wasi_io_streams_borrow_input_stream(stream), ask, &chunk,
                                                                &failure)) {
            if (failure.tag != WASI_IO_STREAMS_STREAM_ERROR_CLOSED)
                err = spindle__http_stream_error(response, &failure, "response body");
            break;
        }
        if (chunk.len > room) {
            job_kind_list_u8_free(&chunk);
            err = spindle__http_fail(response, SPINDLE_HTTP_TOO_LARGE, "the response body is larger than %zu bytes", limit);
            break;
        }
        if (len + chunk.len + 1 > capacity) {
            size_t want = capacity * 2 > len + chunk.len + 1 ? capacity * 2 : len + chunk.len + 1;
            char *grown = (char *)realloc(bytes, want);
            if (!grown) {
                job_kind_list_u8_free(&chunk);
                err = spindle__http_fail(response, SPINDLE_HTTP_TOO_LARGE, "no memory for a response body of %zu bytes",
                                         len + chunk.len);
                break;
            }
            bytes = grown;
            capacity = want;
        }
        if (chunk.len) memcpy(bytes + len, chunk.ptr, chunk.len);
        len += chunk.len;
        job_kind_list_u8_free(&chunk);
    }
    wasi_io_streams_input_stream_drop_own(stream);
    wasi_http_types_future_trailers_drop_own(wasi_http_types_static_incoming_body_finish(body));
    if (err) {
        free(bytes);
        return err;
    }
    bytes[len] = '\0';
    response->body = bytes;
    response->body_len = len;
    return SPINDLE_HTTP_OK;
}

/* Sends `request` through the host and waits for the whole response, body included,
 * into `*response` (which it overwrites: free an earlier one first). SPINDLE_HTTP_OK
 * means a response came, whatever its status; free it with spindle_http_response_free.
 * Any other value means none came: `response` then holds only error_detail (freeing it
 * is harmless), and spindle_http_failure says what the step should report. Usable from
 * steps and hooks. */
static inline spindle_http_error spindle_http_send(const spindle_http_request *request,
                                                   spindle_http_response *response) {
    memset(response, 0, sizeof *response);
    if (request->body_len && !request->body)
        return spindle__http_fail(response, SPINDLE_HTTP_INVALID_REQUEST, "body_len without a body");
    wasi_http_types_own_outgoing_request_t outgoing;
    spindle_http_error err = spindle__http_outgoing(response, request, &outgoing);
    if (err) return err;
    /* An empty body is never opened, so the host sends none rather than an empty one. */
    wasi_http_types_own_outgoing_body_t body;
    bool has_body = request->body_len > 0;
    if (has_body &&
        !wasi_http_types_method_outgoing_request_body(wasi_http_types_borrow_outgoing_request(outgoing), &body)) {
        wasi_http_types_outgoing_request_drop_own(outgoing);
        return spindle__http_fail(response, SPINDLE_HTTP_OTHER, "the request body was already taken");
    }
    wasi_http_types_own_future_incoming_response_t future;
    wasi_http_types_error_code_t code;
    if (!wasi_http_outgoing_handler_handle(outgoing, NULL, &future, &code)) { /* takes the request either way */
        if (has_body) wasi_http_types_outgoing_body_drop_own(body);
        return spindle__http_code(response, &code);
    }
    /* The body goes out after `handle`, while the host sends: written before, a large
     * one would fill the host's buffer with nobody reading it. */
    spindle_http_error sent = SPINDLE_HTTP_OK;
    if (has_body) {
        sent = spindle__http_write(response, body, (const uint8_t *)request->body, request->body_len);
        if (sent) {
            wasi_http_types_outgoing_body_drop_own(body); /* unfinished: the host aborts the request */
        } else if (!wasi_http_types_static_outgoing_body_finish(body, NULL, &code)) {
            sent = spindle__http_code(response, &code);
        }
    }
    /* A failed response explains a failed body write (a denied request's body goes
     * nowhere), so it is reported first. */
    wasi_http_types_own_incoming_response_t incoming;
    err = spindle__http_wait(response, future, &incoming);
    if (err) return err;
    wasi_http_types_borrow_incoming_response_t borrowed = wasi_http_types_borrow_incoming_response(incoming);
    if (!sent) {
        response->status = wasi_http_types_method_incoming_response_status(borrowed);
        spindle__http_headers(response, borrowed);
        size_t limit = request->max_response_bytes ? request->max_response_bytes : SPINDLE_HTTP_MAX_RESPONSE_BYTES;
        sent = spindle__http_read(response, borrowed, limit);
    }
    wasi_http_types_incoming_response_drop_own(incoming);
    if (sent) {
        char detail[sizeof response->error_detail];
        memcpy(detail, response->error_detail, sizeof detail);
        spindle_http_response_free(response);
        memcpy(response->error_detail, detail, sizeof detail);
    }
    return sent;
}

/* ------------------------------------------------------------------------------------
 * Fan-outs: child jobs and when to call the step again
 * ---------------------------------------------------------------------------------- */

typedef spindle_job_types_child_spec_t spindle_child;

/* Children to create and a join. Build it on the stack with spindle_fan_out_all/any/
 * count, add children, and hand it to spindle_await_children, which takes it over. */
typedef struct spindle_fan_out {
    spindle_job_types_fan_out_t wit;
    size_t capacity;
    char *invalid; /* why a child could not be added (malloc'd), reported at the await */
} spindle_fan_out;

static inline spindle_fan_out spindle__fan_out(uint8_t join, uint32_t count) {
    spindle_fan_out fan_out;
    memset(&fan_out, 0, sizeof fan_out);
    fan_out.wit.join.tag = join;
    fan_out.wit.join.val.count = count;
    fan_out.wit.leftover = SPINDLE_JOB_TYPES_LEFTOVER_CANCEL;
    return fan_out;
}

/* Call the step again once every child is final. */
static inline spindle_fan_out spindle_fan_out_all(void) {
    return spindle__fan_out(SPINDLE_JOB_TYPES_JOIN_ALL, 0);
}

/* Call the step again once the first child is final; the others are cancelled unless
 * spindle_fan_out_keep_leftovers says they run on. */
static inline spindle_fan_out spindle_fan_out_any(void) {
    return spindle__fan_out(SPINDLE_JOB_TYPES_JOIN_ANY, 0);
}

/* Call the step again once `n` children are final. */
static inline spindle_fan_out spindle_fan_out_count(uint32_t n) {
    return spindle__fan_out(SPINDLE_JOB_TYPES_JOIN_COUNT, n);
}

/* Adds a child of `kind` with raw `input` bytes (copied). The step gets the results in
 * the order the children were added. The returned child, for the spindle_child_*
 * setters, is valid until the next add. */
static inline spindle_child *spindle_fan_out_add_bytes(spindle_fan_out *fan_out, const char *kind, const void *input,
                                                       size_t len) {
    spindle_job_types_list_child_spec_t *children = &fan_out->wit.children;
    if (children->len == fan_out->capacity) {
        fan_out->capacity = fan_out->capacity ? 2 * fan_out->capacity : 4;
        children->ptr = (spindle_child *)realloc(children->ptr, fan_out->capacity * sizeof *children->ptr);
        if (!children->ptr) abort();
    }
    spindle_child *child = &children->ptr[children->len++];
    memset(child, 0, sizeof *child);
    child->kind = spindle__wit_string(kind);
    child->input = spindle__wit_bytes(input, len);
    return child;
}

/* Adds a child of `kind` whose input is `input` as JSON (consumed). An input cJSON
 * cannot print (NULL) makes the await a refusal `invalid-child-input`. */
static inline spindle_child *spindle_fan_out_add(spindle_fan_out *fan_out, const char *kind, cJSON *input) {
    char *text = input ? cJSON_PrintUnformatted(input) : NULL;
    cJSON_Delete(input);
    if (!text && !fan_out->invalid) {
        size_t size = 64 + (kind ? strlen(kind) : 0);
        fan_out->invalid = (char *)spindle__xmalloc(size);
        snprintf(fan_out->invalid, size, "child %zu of kind `%s`: no JSON input", fan_out->wit.children.len,
                 kind ? kind : "");
    }
    spindle_child *child = spindle_fan_out_add_bytes(fan_out, kind, text ? text : "null", text ? strlen(text) : 4);
    free(text);
    return child;
}

/* An idempotency key among the tenant's jobs: a child whose key is taken is the job that
 * holds it, not a new one. */
static inline void spindle_child_idempotency_key(spindle_child *child, const char *fmt, ...) SPINDLE__PRINTF(2, 3);
static inline void spindle_child_idempotency_key(spindle_child *child, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    char *key = spindle__vformat_heap(fmt, args);
    va_end(args);
    job_kind_option_string_free(&child->idempotency_key);
    child->idempotency_key.is_some = true;
    child->idempotency_key.val = spindle__wit_string(key);
    free(key);
}

/* The child's priority; `normal` if not set. */
static inline void spindle_child_priority(spindle_child *child, spindle_priority priority) {
    child->priority.is_some = true;
    child->priority.val = (spindle_job_types_priority_t)priority;
}

/* Adds a lease key the child must hold while a step of it runs. */
static inline void spindle_child_lease_key(spindle_child *child, const char *key) {
    job_kind_list_string_t *keys = &child->lease_keys;
    keys->ptr = (job_kind_string_t *)realloc(keys->ptr, (keys->len + 1) * sizeof *keys->ptr);
    if (!keys->ptr) abort();
    keys->ptr[keys->len++] = spindle__wit_string(key);
}

/* Children still open when the join is met run on (the default cancels them). */
static inline void spindle_fan_out_keep_leftovers(spindle_fan_out *fan_out) {
    fan_out->wit.leftover = SPINDLE_JOB_TYPES_LEFTOVER_KEEP;
}

/* The cursor the step is called again with (also settable with spindle_with_cursor). */
static inline void spindle_fan_out_cursor(spindle_fan_out *fan_out, const char *cursor) {
    job_kind_option_string_free(&fan_out->wit.cursor);
    fan_out->wit.cursor.is_some = true;
    fan_out->wit.cursor.val = spindle__wit_string(cursor);
}

/* Frees a fan-out that will not be awaited after all. */
static inline void spindle_fan_out_free(spindle_fan_out *fan_out) {
    spindle_job_types_fan_out_free(&fan_out->wit);
    free(fan_out->invalid);
    *fan_out = spindle__fan_out(SPINDLE_JOB_TYPES_JOIN_ALL, 0);
}

/* Creates the fan-out's children and calls the step again (same attempt, with the
 * fan-out's cursor) once its join is met; spindle_children then has their results.
 * Takes the fan-out over: it is empty afterwards. */
static inline spindle_outcome spindle_await_children(spindle_fan_out *fan_out) {
    spindle_outcome outcome;
    if (fan_out->invalid) {
        outcome = spindle_with_detail(
            spindle_refused("invalid-child-input", "a child's input is not serialisable as JSON"), "%s",
            fan_out->invalid);
        spindle_fan_out_free(fan_out);
        return outcome;
    }
    outcome = spindle__outcome(SPINDLE_JOB_TYPES_STEP_OUTCOME_AWAIT_CHILDREN);
    outcome.wit.val.await_children = fan_out->wit;
    *fan_out = spindle__fan_out(SPINDLE_JOB_TYPES_JOIN_ALL, 0);
    return outcome;
}

/* ------------------------------------------------------------------------------------
 * Reading JSON: typed getters that record a misfit instead of returning an error
 * ---------------------------------------------------------------------------------- */

/* A place in a JSON document: the node (NULL when absent), where a misfit is recorded
 * and under which code, and its path for messages. A small value: pass it by value. */
typedef struct spindle_value {
    struct spindle__ctx *ctx;
    const cJSON *node;
    const char *code; /* e.g. "invalid-input" */
    const char *what; /* e.g. "the job's input" */
    char path[96];
} spindle_value;

static inline spindle_value spindle__value(struct spindle__ctx *ctx, const cJSON *node, const char *code,
                                           const char *what) {
    spindle_value value;
    value.ctx = ctx;
    value.node = node;
    value.code = code;
    value.what = what;
    value.path[0] = '\0';
    return value;
}

/* Appends to a value's path, cutting it short rather than overflowing. */
static inline void spindle__path_add(char path[96], const char *more) {
    size_t len = strlen(path);
    while (*more && len + 1 < 96) path[len++] = *more++;
    path[len] = '\0';
}

/* Records that `value` does not fit: "<what> does not fit at `<path>`: <problem>", with
 * the value's code. For a kind's own checks (`must not be empty`). */
static inline void spindle_misfit(spindle_value value, const char *problem) {
    if (!value.ctx) return;
    if (value.path[0])
        spindle__fail(value.ctx, false, value.code, "%s does not fit at `%s`: %s", value.what, value.path, problem);
    else
        spindle__fail(value.ctx, false, value.code, "%s does not fit: %s", value.what, problem);
}

/* Whether the value is there and not JSON null. */
static inline bool spindle_present(spindle_value value) {
    return value.node && !cJSON_IsNull(value.node);
}

/* The cJSON node, or NULL when absent; owned by the call. */
static inline const cJSON *spindle_json(spindle_value value) {
    return value.node;
}

/* The member `field` of an object; absent if it is missing (or the value is). */
static inline spindle_value spindle_get(spindle_value value, const char *field) {
    spindle_value member = value;
    if (value.path[0]) spindle__path_add(member.path, ".");
    spindle__path_add(member.path, field);
    member.node = NULL;
    if (!spindle_present(value)) return member;
    if (!cJSON_IsObject(value.node)) {
        spindle_misfit(value, "expected an object");
        return member;
    }
    member.node = cJSON_GetObjectItemCaseSensitive(value.node, field);
    return member;
}

/* Element `index` of an array; absent if out of range (or the value is absent). */
static inline spindle_value spindle_at(spindle_value value, size_t index) {
    spindle_value element = value;
    char subscript[24];
    snprintf(subscript, sizeof subscript, "[%zu]", index);
    spindle__path_add(element.path, subscript);
    element.node = NULL;
    if (!spindle_present(value)) return element;
    if (!cJSON_IsArray(value.node)) {
        spindle_misfit(value, "expected an array");
        return element;
    }
    element.node = index <= (size_t)INT32_MAX ? cJSON_GetArrayItem(value.node, (int)index) : NULL;
    return element;
}

/* Requires the value be there (not null); records "missing" otherwise. */
static inline bool spindle__required(spindle_value value) {
    if (spindle_present(value)) return true;
    spindle_misfit(value, "missing");
    return false;
}

/* The value, required to be an object (recorded otherwise; then absent). */
static inline spindle_value spindle_object(spindle_value value) {
    if (spindle__required(value) && !cJSON_IsObject(value.node)) {
        spindle_misfit(value, "expected an object");
        value.node = NULL;
    }
    return value;
}

/* The value, required to be an array (recorded otherwise; then absent). */
static inline spindle_value spindle_array(spindle_value value) {
    if (spindle__required(value) && !cJSON_IsArray(value.node)) {
        spindle_misfit(value, "expected an array");
        value.node = NULL;
    }
    return value;
}

/* An array's length: 0 when absent; an array is required otherwise. */
static inline size_t spindle_len(spindle_value value) {
    if (!spindle_present(value)) return 0;
    if (!cJSON_IsArray(value.node)) {
        spindle_misfit(value, "expected an array");
        return 0;
    }
    return (size_t)cJSON_GetArraySize(value.node);
}

static inline const char *spindle__string(spindle_value value, const char *fallback, bool required) {
    if (!spindle_present(value)) {
        if (required) spindle_misfit(value, "missing");
        return fallback;
    }
    if (!cJSON_IsString(value.node)) {
        spindle_misfit(value, "expected a string");
        return required ? "" : fallback;
    }
    return value.node->valuestring;
}

/* A required string; "" when it does not fit (the misfit is recorded). */
static inline const char *spindle_string(spindle_value value) {
    return spindle__string(value, "", true);
}

/* A string, or `fallback` when absent or null; a value of another type is a misfit. */
static inline const char *spindle_string_or(spindle_value value, const char *fallback) {
    return spindle__string(value, fallback, false);
}

static inline bool spindle__bool(spindle_value value, bool fallback, bool required) {
    if (!spindle_present(value)) {
        if (required) spindle_misfit(value, "missing");
        return fallback;
    }
    if (!cJSON_IsBool(value.node)) {
        spindle_misfit(value, "expected true or false");
        return fallback;
    }
    return cJSON_IsTrue(value.node);
}

/* A required boolean; false when it does not fit. */
static inline bool spindle_bool(spindle_value value) {
    return spindle__bool(value, false, true);
}

/* A boolean, or `fallback` when absent or null. */
static inline bool spindle_bool_or(spindle_value value, bool fallback) {
    return spindle__bool(value, fallback, false);
}

static inline double spindle__number(spindle_value value, double fallback, bool required) {
    if (!spindle_present(value)) {
        if (required) spindle_misfit(value, "missing");
        return fallback;
    }
    if (!cJSON_IsNumber(value.node)) {
        spindle_misfit(value, "expected a number");
        return fallback;
    }
    return value.node->valuedouble;
}

/* A required number; 0 when it does not fit. */
static inline double spindle_number(spindle_value value) {
    return spindle__number(value, 0, true);
}

/* A number, or `fallback` when absent or null. */
static inline double spindle_number_or(spindle_value value, double fallback) {
    return spindle__number(value, fallback, false);
}

static inline int64_t spindle__int(spindle_value value, int64_t fallback, bool required) {
    if (!spindle_present(value)) {
        if (required) spindle_misfit(value, "missing");
        return fallback;
    }
    /* cJSON keeps numbers as doubles: integers are exact up to 2^53. */
    double number = cJSON_IsNumber(value.node) ? value.node->valuedouble : 0.5;
    if (!(number >= -9007199254740992.0 && number <= 9007199254740992.0) || (double)(int64_t)number != number) {
        spindle_misfit(value, "expected an integer");
        return fallback;
    }
    return (int64_t)number;
}

/* A required integer (a JSON number with no fraction, within ±2^53); 0 when it does
 * not fit. */
static inline int64_t spindle_int(spindle_value value) {
    return spindle__int(value, 0, true);
}

/* An integer, or `fallback` when absent or null. */
static inline int64_t spindle_int_or(spindle_value value, int64_t fallback) {
    return spindle__int(value, fallback, false);
}

/* Parses `len` bytes as JSON into a call-owned document; NULL (and a refusal with `code`
 * recorded on `ctx`) when they are not valid JSON. */
static inline const cJSON *spindle__parse(struct spindle__ctx *ctx, const uint8_t *bytes, size_t len,
                                          const char *code, const char *what) {
    char *text = spindle__strndup(bytes, len);
    const char *end = NULL;
    cJSON *json = cJSON_ParseWithLengthOpts(text, len + 1, &end, true);
    if (json && end != text + len) { /* a NUL inside the bytes */
        cJSON_Delete(json);
        json = NULL;
    }
    if (!json) {
        spindle__fail(ctx, false, code, "%s is not valid JSON", what);
        return NULL;
    }
    return (const cJSON *)spindle__own(json, spindle__drop_json);
}

/* ------------------------------------------------------------------------------------
 * The step context
 * ---------------------------------------------------------------------------------- */

struct spindle_step {
    struct spindle__ctx ctx;
    const spindle_job_types_step_input_t *input;
    const char *key;
    const char *job_id;
    const char *idempotency_key;
    const char *cursor;
    bool input_parsed;
    const cJSON *input_json;
    spindle_awaited awaited;
    spindle_child_result *children;
    size_t child_count;
    spindle_heartbeat_reply stop;
};

/* The key of the step to run, one the kind declared. */
static inline const char *spindle_step_key(const spindle_step *step) { return step->key; }

/* The job's id (a UUID in text form). */
static inline const char *spindle_job_id(const spindle_step *step) { return step->job_id; }

/* 1 for the first attempt of this step, 2 for the first retry, ... */
static inline uint32_t spindle_attempt(const spindle_step *step) { return step->input->attempt; }

/* Stable across this step's attempts: use it to make side effects idempotent, since a
 * step can run more than once. */
static inline const char *spindle_idempotency_key(const spindle_step *step) { return step->idempotency_key; }

/* The job's input as submitted, raw. */
static inline const uint8_t *spindle_payload(const spindle_step *step, size_t *len) {
    if (len) *len = step->input->payload.len;
    return step->input->payload.len ? step->input->payload.ptr : (const uint8_t *)"";
}

/* Whether a getter (or spindle_keep_alive) recorded a failure on this call. */
static inline bool spindle_failed(const spindle_step *step) { return step->ctx.failed; }

/* The recorded failure as an outcome, to return it at once. (Returning anything else
 * reports it all the same.) */
static inline spindle_outcome spindle_failure(spindle_step *step) {
    if (!step->ctx.failed) return spindle_refused("no-failure", "the step reported a failure it had not recorded");
    return step->ctx.retryable ? spindle_retryable(step->ctx.code, "%s", step->ctx.message)
                               : spindle_refused(step->ctx.code, "%s", step->ctx.message);
}

/* Records a refusal on the step, as a getter would: for a kind's own checks in helper
 * functions that return a value, not an outcome. The first failure recorded wins. */
static inline void spindle_reject(spindle_step *step, const char *code, const char *fmt, ...) SPINDLE__PRINTF(3, 4);
static inline void spindle_reject(spindle_step *step, const char *code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    spindle__vfail(&step->ctx, false, code, fmt, args);
    va_end(args);
}

/* The job's input parsed as JSON, or NULL (refused `invalid-input` recorded). */
static inline const cJSON *spindle_input_json(spindle_step *step) {
    if (!step->input_parsed) {
        step->input_parsed = true;
        step->input_json = spindle__parse(&step->ctx, step->input->payload.ptr, step->input->payload.len,
                                          "invalid-input", "the job's input");
    }
    return step->input_json;
}

/* The job's input, for the typed getters; misfits are refused `invalid-input`. */
static inline spindle_value spindle_input(spindle_step *step) {
    return spindle__value(&step->ctx, spindle_input_json(step), "invalid-input", "the job's input");
}

/* A value over a cJSON document the kind got elsewhere (an HTTP body, say): misfits are
 * recorded on the step with `code`, messages say `what` ("the mailer's answer"). */
static inline spindle_value spindle_value_of(spindle_step *step, const cJSON *json, const char *code,
                                             const char *what) {
    return spindle__value(&step->ctx, json, code, what);
}

/* The raw output of an earlier step of this job, if it came with this call's input;
 * NULL otherwise. The host may leave large outputs out: see spindle_prior_output. */
static inline const uint8_t *spindle_prior_bytes(const spindle_step *step, const char *key, size_t *len) {
    const spindle_job_types_list_prior_output_t *prior = &step->input->prior;
    size_t key_len = strlen(key);
    for (size_t i = 0; i < prior->len; i++) {
        const spindle_job_types_prior_output_t *entry = &prior->ptr[i];
        if (entry->step.len == key_len && memcmp(entry->step.ptr, key, key_len) == 0) {
            if (len) *len = entry->output.len;
            return entry->output.len ? entry->output.ptr : (const uint8_t *)"";
        }
    }
    if (len) *len = 0;
    return NULL;
}

/* The raw output of an earlier step if it completed: from the input, or else asked of
 * the host (`prior-output`), which has every output even when the input was capped.
 * NULL if that step has not completed (it was skipped, or is declared later). */
static inline const uint8_t *spindle_prior_output(const spindle_step *step, const char *key, size_t *len) {
    const uint8_t *bytes = spindle_prior_bytes(step, key, len);
    if (bytes) return bytes;
    job_kind_string_t name = spindle__borrow(key);
    job_kind_list_u8_t output;
    if (!spindle_job_host_prior_output(&name, &output)) return NULL;
    char *copy = spindle__strndup(output.ptr, output.len);
    if (len) *len = output.len;
    job_kind_list_u8_free(&output);
    return (const uint8_t *)copy;
}

static inline spindle_value spindle__prior(spindle_step *step, const char *key, bool required) {
    const char *what = spindle_format("the output of step `%s`", key);
    size_t len;
    const uint8_t *bytes = spindle_prior_output(step, key, &len);
    if (!bytes) {
        if (required) spindle__fail(&step->ctx, false, "missing-prior", "step `%s` has no output in this job", key);
        return spindle__value(&step->ctx, NULL, "invalid-prior", what);
    }
    return spindle__value(&step->ctx, spindle__parse(&step->ctx, bytes, len, "invalid-prior", what), "invalid-prior",
                          what);
}

/* An earlier step's JSON output, required: refused `missing-prior` if that step has not
 * completed, `invalid-prior` if its output is not JSON or a getter finds a misfit. */
static inline spindle_value spindle_prior(spindle_step *step, const char *key) {
    return spindle__prior(step, key, true);
}

/* An earlier step's JSON output, absent (no failure) if it has not completed: for
 * steps that may be skipped. */
static inline spindle_value spindle_prior_if_completed(spindle_step *step, const char *key) {
    return spindle__prior(step, key, false);
}

/* The cursor of this attempt's last `more` or await outcome, or NULL. */
static inline const char *spindle_cursor(const spindle_step *step) { return step->cursor; }

/* The cursor as JSON (see spindle_more_json): absent when there is none, refused
 * `invalid-cursor` when it is not JSON. */
static inline spindle_value spindle_cursor_value(spindle_step *step) {
    const cJSON *json = step->cursor ? spindle__parse(&step->ctx, (const uint8_t *)step->cursor,
                                                      strlen(step->cursor), "invalid-cursor", "the step's cursor")
                                     : NULL;
    return spindle__value(&step->ctx, json, "invalid-cursor", "the step's cursor");
}

/* What this call follows: SPINDLE_AWAITED_NOTHING except after an await outcome. */
static inline spindle_awaited spindle_awaited_kind(const spindle_step *step) { return step->awaited; }

/* The results of the children the step fanned out, in the order it asked for them, when
 * this call follows its spindle_await_children; NULL (and *count 0) otherwise. */
static inline const spindle_child_result *spindle_children(const spindle_step *step, size_t *count) {
    if (count) *count = step->child_count;
    return step->awaited == SPINDLE_AWAITED_CHILDREN ? step->children : NULL;
}

/* A child's output as JSON: absent if it has none, refused `invalid-child-output` if it
 * is not JSON. */
static inline spindle_value spindle_child_output(spindle_step *step, const spindle_child_result *child) {
    const char *what = spindle_format("the output of child %s", child->job_id);
    const cJSON *json = child->has_output
                            ? spindle__parse(&step->ctx, child->output, child->output_len, "invalid-child-output", what)
                            : NULL;
    return spindle__value(&step->ctx, json, "invalid-child-output", what);
}

/* The raw body of the signal the step waited for, when this call follows its
 * spindle_await_signal and the signal came; NULL otherwise. */
static inline const uint8_t *spindle_signal_bytes(const spindle_step *step, size_t *len) {
    if (step->awaited != SPINDLE_AWAITED_SIGNAL) {
        if (len) *len = 0;
        return NULL;
    }
    const job_kind_list_u8_t *body = &step->input->awaited.val.val.signal;
    if (len) *len = body->len;
    return body->len ? body->ptr : (const uint8_t *)"";
}

/* The signal's body as JSON: absent when this call follows no signal, refused
 * `invalid-signal` when the body is not JSON. */
static inline spindle_value spindle_signal(spindle_step *step) {
    size_t len;
    const uint8_t *body = spindle_signal_bytes(step, &len);
    const cJSON *json = body ? spindle__parse(&step->ctx, body, len, "invalid-signal", "the signal's body") : NULL;
    return spindle__value(&step->ctx, json, "invalid-signal", "the signal's body");
}

/* Whether this call follows an await-signal whose timeout passed first. */
static inline bool spindle_signal_timed_out(const spindle_step *step) {
    return step->awaited == SPINDLE_AWAITED_SIGNAL_TIMEOUT;
}

/* Tells the host the step is alive (renewing its lease), with progress when `cursor`
 * is not NULL, and returns its answer. Long steps call it regularly and return soon
 * after a stop. */
static inline spindle_heartbeat_reply spindle_heartbeat_progress(spindle_step *step, const char *cursor,
                                                                 uint64_t done, int64_t total) {
    spindle_job_host_checkpoint_t progress;
    progress.cursor = spindle__borrow(cursor);
    progress.done = done;
    progress.total.is_some = total >= 0;
    progress.total.val = total >= 0 ? (uint64_t)total : 0;
    spindle_heartbeat_reply reply = (spindle_heartbeat_reply)spindle_job_host_heartbeat(cursor ? &progress : NULL);
    if (reply != SPINDLE_PROCEED) step->stop = reply;
    return reply;
}

/* A heartbeat without progress. */
static inline spindle_heartbeat_reply spindle_heartbeat(spindle_step *step) {
    return spindle_heartbeat_progress(step, NULL, 0, SPINDLE_TOTAL_UNKNOWN);
}

/* A heartbeat that records retryable `stopped` and returns false when the host says
 * stop, so a loop can `if (!spindle_keep_alive(step)) return spindle_failure(step);`.
 * (The host ignores what a stopped step reports anyway.) */
static inline bool spindle_keep_alive(spindle_step *step) {
    if (spindle_heartbeat(step) == SPINDLE_PROCEED) return true;
    spindle__fail(&step->ctx, true, "stopped", "the step stopped as the host asked");
    return false;
}

/* The stop answer any heartbeat of this call got, else SPINDLE_PROCEED. */
static inline spindle_heartbeat_reply spindle_stop_requested(const spindle_step *step) { return step->stop; }

/* ------------------------------------------------------------------------------------
 * The hooks' job summary
 * ---------------------------------------------------------------------------------- */

struct spindle_summary {
    struct spindle__ctx ctx;
    const spindle_job_types_job_summary_t *wit;
    const char *job_id;
    const char *failure_code;
    const char *failure_message;
};

/* The job's id; stable, so a hook can use it to be idempotent. */
static inline const char *spindle_summary_job_id(const spindle_summary *job) { return job->job_id; }

/* The job's input as submitted, raw. */
static inline const uint8_t *spindle_summary_payload(const spindle_summary *job, size_t *len) {
    if (len) *len = job->wit->payload.len;
    return job->wit->payload.len ? job->wit->payload.ptr : (const uint8_t *)"";
}

/* The job's input, for the typed getters (misfits: `invalid-input`). */
static inline spindle_value spindle_summary_input(spindle_summary *job) {
    const cJSON *json = spindle__parse(&job->ctx, job->wit->payload.ptr, job->wit->payload.len, "invalid-input",
                                       "the job's input");
    return spindle__value(&job->ctx, json, "invalid-input", "the job's input");
}

/* A completed step's raw output, or NULL if it did not complete. */
static inline const uint8_t *spindle_summary_output_bytes(const spindle_summary *job, const char *key, size_t *len) {
    size_t key_len = strlen(key);
    for (size_t i = 0; i < job->wit->outputs.len; i++) {
        const spindle_job_types_prior_output_t *entry = &job->wit->outputs.ptr[i];
        if (entry->step.len == key_len && memcmp(entry->step.ptr, key, key_len) == 0) {
            if (len) *len = entry->output.len;
            return entry->output.len ? entry->output.ptr : (const uint8_t *)"";
        }
    }
    if (len) *len = 0;
    return NULL;
}

/* A completed step's JSON output: absent if it did not complete (misfits: `invalid-prior`). */
static inline spindle_value spindle_summary_output(spindle_summary *job, const char *key) {
    const char *what = spindle_format("the output of step `%s`", key);
    size_t len;
    const uint8_t *bytes = spindle_summary_output_bytes(job, key, &len);
    const cJSON *json = bytes ? spindle__parse(&job->ctx, bytes, len, "invalid-prior", what) : NULL;
    return spindle__value(&job->ctx, json, "invalid-prior", what);
}

/* Why the job failed (in on_failure); NULL in on_success. */
static inline const char *spindle_summary_failure_code(const spindle_summary *job) { return job->failure_code; }
static inline const char *spindle_summary_failure_message(const spindle_summary *job) {
    return job->failure_message;
}

/* Records the hook's failure and returns false: `return spindle_hook_fail(job, ...)`. */
static inline bool spindle_hook_fail(spindle_summary *job, const char *code, const char *fmt, ...) SPINDLE__PRINTF(3, 4);
static inline bool spindle_hook_fail(spindle_summary *job, const char *code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    spindle__vfail(&job->ctx, false, code, fmt, args);
    va_end(args);
    return false;
}

/* ------------------------------------------------------------------------------------
 * The exports' glue (what SPINDLE_EXPORT_KIND calls)
 * ---------------------------------------------------------------------------------- */

static inline const char *spindle__wit_text(job_kind_string_t text) {
    return spindle__strndup(text.ptr, text.len);
}

static inline void spindle__describe(const spindle_kind *kind, spindle_job_types_kind_spec_t *ret) {
    memset(ret, 0, sizeof *ret);
    ret->name = spindle__wit_string(kind->name);
    size_t count = 0;
    while (kind->steps && kind->steps[count].key) count++;
    ret->steps.len = count;
    ret->steps.ptr = count ? (spindle_job_types_step_spec_t *)spindle__xmalloc(count * sizeof *ret->steps.ptr) : NULL;
    for (size_t i = 0; i < count; i++) {
        const spindle_step_def *def = &kind->steps[i];
        spindle_job_types_step_spec_t *spec = &ret->steps.ptr[i];
        memset(spec, 0, sizeof *spec);
        spec->key = spindle__wit_string(def->key);
        spec->weight = def->weight;
        spec->output_schema.is_some = def->output_schema != NULL;
        if (def->output_schema) spec->output_schema.val = spindle__wit_string(def->output_schema);
    }
    ret->cancellable = (kind->flags & SPINDLE_CANCELLABLE) != 0;
    spindle_retry retry = kind->retry.max_attempts ? kind->retry : SPINDLE_DEFAULT_RETRY;
    ret->retry.max_attempts = retry.max_attempts;
    ret->retry.initial_backoff_ms = retry.initial_backoff_ms;
    ret->retry.max_backoff_ms = retry.max_backoff_ms;
    ret->has_failure_effect = kind->on_failure != NULL;
    ret->notifies_on_success = kind->on_success != NULL;
    ret->input_schema.is_some = kind->input_schema != NULL;
    if (kind->input_schema) ret->input_schema.val = spindle__wit_string(kind->input_schema);
}

static inline spindle_step *spindle__step_new(const spindle_job_types_step_input_t *input) {
    spindle_step *step = (spindle_step *)spindle__alloc(sizeof *step);
    memset(step, 0, sizeof *step);
    step->input = input;
    step->key = spindle__wit_text(input->step);
    step->job_id = spindle__wit_text(input->job_id);
    step->idempotency_key = spindle__wit_text(input->idempotency_key);
    step->cursor = input->cursor.is_some ? spindle__wit_text(input->cursor.val) : NULL;
    step->ctx.context = spindle_format("step `%s`", step->key);
    step->stop = SPINDLE_PROCEED;
    if (!input->awaited.is_some) return step;
    switch (input->awaited.val.tag) {
    case SPINDLE_JOB_TYPES_AWAITED_SIGNAL: step->awaited = SPINDLE_AWAITED_SIGNAL; break;
    case SPINDLE_JOB_TYPES_AWAITED_SIGNAL_TIMEOUT: step->awaited = SPINDLE_AWAITED_SIGNAL_TIMEOUT; break;
    case SPINDLE_JOB_TYPES_AWAITED_CHILDREN: {
        const spindle_job_types_list_child_result_t *list = &input->awaited.val.val.children;
        step->awaited = SPINDLE_AWAITED_CHILDREN;
        step->child_count = list->len;
        step->children = (spindle_child_result *)spindle__alloc((list->len ? list->len : 1) * sizeof *step->children);
        for (size_t i = 0; i < list->len; i++) {
            const spindle_job_types_child_result_t *from = &list->ptr[i];
            spindle_child_result *to = &step->children[i];
            to->job_id = spindle__wit_text(from->job_id);
            to->kind = spindle__wit_text(from->kind);
            to->state = from->state.is_some ? (spindle_child_state)from->state.val : SPINDLE_CHILD_OPEN;
            to->has_output = from->output.is_some;
            to->output = from->output.is_some ? (const uint8_t *)spindle__strndup(from->output.val.ptr, from->output.val.len)
                                              : NULL;
            to->output_len = from->output.is_some ? from->output.val.len : 0;
            to->failure_code = from->failure.is_some ? spindle__wit_text(from->failure.val.code) : NULL;
            to->failure_message = from->failure.is_some ? spindle__wit_text(from->failure.val.message) : NULL;
        }
        break;
    }
    }
    return step;
}

/* Logs a failure the way the other SDKs do: context, disposition, code, detail. */
static inline void spindle__log_failure(const char *context, const spindle_outcome *outcome) {
    const spindle_job_types_failure_t *failure;
    if (outcome->wit.tag == SPINDLE_JOB_TYPES_STEP_OUTCOME_RETRYABLE)
        failure = &outcome->wit.val.retryable;
    else if (outcome->wit.tag == SPINDLE_JOB_TYPES_STEP_OUTCOME_REFUSED)
        failure = &outcome->wit.val.refused;
    else
        return;
    const char *code = spindle__wit_text(failure->code);
    const char *said = outcome->detail ? outcome->detail : spindle__wit_text(failure->message);
    spindle_log_warn("%s %s %s: %s", context,
                     outcome->wit.tag == SPINDLE_JOB_TYPES_STEP_OUTCOME_RETRYABLE ? "retryable" : "refused", code, said);
}

static inline void spindle__run_step(const spindle_kind *kind, spindle_job_types_step_input_t *input,
                                     spindle_job_types_step_outcome_t *ret) {
    spindle_step *step = spindle__step_new(input);
    const spindle_step_def *def = kind->steps;
    while (def && def->key && strcmp(def->key, step->key) != 0) def++;
    spindle_outcome outcome;
    if (def && def->key && def->run) {
        outcome = def->run(step);
    } else {
        outcome = spindle_with_detail(spindle_refused("unknown-step", "the kind does not implement this step"),
                                      "step key \"%s\"", step->key);
    }
    if (step->ctx.failed) { /* a recorded failure propagates, whatever was returned */
        spindle_outcome_free(&outcome);
        outcome = spindle_failure(step);
    }
    spindle__log_failure(step->ctx.context, &outcome);
    *ret = outcome.wit; /* the bindings free it after the host has read it */
    free(outcome.detail);
    spindle__arena_release();
    spindle_job_types_step_input_free(input);
}

static inline bool spindle__run_hook(const char *name, spindle_hook_fn hook, spindle_job_types_job_summary_t *wit,
                                     spindle_job_types_failure_t *err) {
    bool ok = true;
    if (hook) {
        spindle_summary *job = (spindle_summary *)spindle__alloc(sizeof *job);
        memset(job, 0, sizeof *job);
        job->wit = wit;
        job->ctx.context = name;
        job->job_id = spindle__wit_text(wit->job_id);
        if (wit->failure.is_some) {
            job->failure_code = spindle__wit_text(wit->failure.val.code);
            job->failure_message = spindle__wit_text(wit->failure.val.message);
        }
        ok = hook(job) && !job->ctx.failed;
        if (!ok) {
            if (!job->ctx.failed) spindle__fail(&job->ctx, false, "hook-failed", "the %s hook failed", name);
            err->code = spindle__wit_string(job->ctx.code);
            err->message = spindle__wit_string(job->ctx.message);
            spindle_log_warn("%s refused %s: %s", name, job->ctx.code, job->ctx.message);
        }
    }
    spindle__arena_release();
    spindle_job_types_job_summary_free(wit);
    return ok;
}

#endif /* SPINDLE_H */
