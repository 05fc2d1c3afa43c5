/* spindle_testing.h — run a C kind's jobs natively, without a host or wasm, for its tests.
 *
 * The kind, its bindings (`job_kind.c`) and cJSON are compiled with the build machine's
 * gcc or clang (test-kind.sh does it). Off wasm, the bindings' import declarations are
 * plain extern symbols: this file defines them (log, heartbeat, prior-output, config),
 * standing in for the host, and calls the kind through the bindings' real export glue,
 * so the lifting, lowering and post-return frees are the ones that run in the component.
 *
 * spindle_run_job() drives a job the way the host's contract describes: steps in
 * declared order, `more` called again with its cursor, `retryable` retried with rising
 * attempt numbers up to the kind's max-attempts, `refused` or an exhausted budget failing
 * the job, children settled by a handler (default: each succeeds with its input as its
 * output) and signals delivered from a queue (else a timeout), then the failure or
 * success hook when the spec asks. It does not wait: backoff and snoozes are skipped.
 *
 * Each call runs in a forked process, as each call runs in a fresh instance on a host:
 * static state does not carry over, and a trap does not end the test. abort() is
 * recorded as the fault `sandbox.panic`, SIGSEGV/SIGBUS as `sandbox.out-of-bounds`, and
 * both are retried like the host's faults, with the call's stderr kept in the record.
 *
 * Include this file in exactly one file of a test (it defines the imports), before
 * anything else, and link the kind's files with it:
 *
 *     #include "spindle_testing.h"
 *
 *     static void greets_ada(void) {
 *         spindle_test_run *run = spindle_run_job("{\"name\":\"Ada\"}");
 *         SPINDLE_EXPECT_STR(run->state, "succeeded");
 *         SPINDLE_EXPECT_STR(spindle_test_output(run, "deliver"), "{\"delivered\":\"Hello, Ada!\",\"attempt\":1}");
 *         spindle_test_run_free(run);
 *     }
 *
 *     int main(void) {
 *         SPINDLE_TEST(greets_ada);
 *         return spindle_test_finish(); // prints "N passed, N failed"
 *     }
 *
 * Settings (spindle_test_set_config, _set_secret, _set_child_handler, _set_heartbeat,
 * _send_signal, _set_prior_cap) hold until spindle_test_reset(), which SPINDLE_TEST
 * calls before each case. Handlers run in the call's process: state they change there
 * does not come back.
 *
 * Outbound HTTP: the wasi:http calls spindle_http_send makes are served here, and the
 * handler set with spindle_test_set_http answers each request (without one, a request
 * fails with SPINDLE_HTTP_OTHER). The handler sees what the host would send — secrets
 * in place of their placeholders — and the run records each request in `http_calls`,
 * which is where a test checks what was sent. The stand-in keeps a resource table as
 * the host does and aborts the call (a trap, `sandbox.panic`) where the host would
 * trap: a handle used after its drop, a parent dropped before its child, a write of
 * more than 4096 bytes. Under SPINDLE_TEST_LEAKS a call that leaves a resource
 * undropped fails as `test.undropped-resource`. Other raw wasi:http calls still abort
 * with a line on stderr saying the local runner does not serve them.
 */
#ifndef SPINDLE_TESTING_H
#define SPINDLE_TESTING_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fork, getline, dup2 */
#endif

#include <errno.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spindle.h"

/* The job id every call of spindle_run_job gets, and the ids of the children it creates. */
#define SPINDLE_TEST_JOB_ID "00000000-0000-7000-8000-000000000000"
/* Calls of one step (continuations and snoozes included) before the run gives up on it. */
#define SPINDLE_TEST_MAX_CALLS 100000

/* ------------------------------------------------------------------------------------
 * What a run records
 * ---------------------------------------------------------------------------------- */

typedef struct spindle_test_log {
    char *step; /* the call's step, or the hook's name */
    uint32_t attempt;
    spindle_log_level level;
    char *message;
} spindle_test_log;

/* One call of run-step and what it reported. Fields that do not apply are NULL or 0. */
typedef struct spindle_test_call {
    char *step;
    uint32_t attempt;
    char *cursor;            /* the cursor the call received */
    spindle_awaited awaited; /* what it was called again after */
    /* "complete", "skip", "retryable", "refused", "more", "snooze", "await-children",
     * "await-signal", or "fault" (a trap; code `sandbox.*`). */
    char *outcome;
    char *code, *message; /* retryable, refused, fault */
    char *output;         /* complete: the output, with a NUL after it */
    size_t output_len;
    char *reason;         /* skip */
    char *next_cursor;    /* more, and await outcomes that set one */
    uint64_t done;        /* more */
    int64_t total;        /* more: SPINDLE_TOTAL_UNKNOWN when not given */
    uint32_t seconds;     /* snooze, and await-signal's timeout */
    unsigned heartbeats;
    char *stderr_text;    /* what the call wrote to stderr ("" if nothing) */
    cJSON *json;          /* the whole outcome, as JSON */
} spindle_test_call;

typedef struct spindle_test_step_output {
    char *step;
    char *output; /* with a NUL after it */
    size_t len;
} spindle_test_step_output;

/* One child of a fan-out and how it was settled. */
typedef struct spindle_test_child_run {
    char *step;
    uint32_t attempt;
    char *job_id;
    char *kind;
    char *input;
    char *idempotency_key; /* NULL if none */
    spindle_child_state state;
    char *output;          /* NULL if none */
    char *failure_code;    /* NULL if none */
} spindle_test_child_run;

typedef struct spindle_test_signal_wait {
    char *step;
    uint32_t attempt;
    char *name;
    uint32_t timeout_secs;
    char *body; /* the signal consumed; NULL if it timed out */
} spindle_test_signal_wait;

/* One outbound request a call made, as the upstream would get it. */
typedef struct spindle_test_http_call {
    char *step; /* the call's step, or the hook's name */
    uint32_t attempt;
    char *method;
    char *url; /* scheme://authority/path?query */
    spindle_http_header *headers; /* as sent: secrets in place, names lower-case */
    size_t header_count;
    char *body; /* with a NUL after it */
    size_t body_len;
    unsigned body_writes; /* the blocking-write-and-flush calls the body took */
    uint16_t status;      /* what the handler answered; 0 with an error */
    char *error;          /* the error answered (spindle_http_error_name), or NULL */
} spindle_test_http_call;

typedef struct spindle_test_run {
    const char *state; /* "succeeded" or "failed" */
    bool succeeded;
    char *failure_step, *failure_code, *failure_message; /* NULL when it succeeded */
    spindle_test_call *calls;
    size_t call_count;
    spindle_test_step_output *outputs; /* of the steps that completed, in order */
    size_t output_count;
    spindle_test_log *logs;
    size_t log_count;
    spindle_test_child_run *children;
    size_t child_count;
    spindle_test_signal_wait *signal_waits;
    size_t signal_wait_count;
    const char *hook; /* "on-failure" or "on-success" when one ran, else NULL */
    bool hook_ok;
    char *hook_code, *hook_message;
    char *stderr_text; /* everything the kind wrote to stderr, every call */
    cJSON *spec;       /* what describe said */
    spindle_test_http_call *http_calls; /* every outbound request, in order */
    size_t http_call_count;
} spindle_test_run;

/* How a child ended, as a child handler says. */
typedef struct spindle_test_child_outcome {
    spindle_child_state state;
    const char *output; /* JSON text when it succeeded, or NULL */
    const char *failure_code, *failure_message;
} spindle_test_child_outcome;

typedef spindle_test_child_outcome (*spindle_test_child_handler)(const char *kind, const char *input, void *data);
typedef spindle_heartbeat_reply (*spindle_test_heartbeat_handler)(const char *step, uint32_t attempt, unsigned beat,
                                                                  void *data);

static inline spindle_test_child_outcome spindle_test_child_succeeded(const char *output_json) {
    spindle_test_child_outcome outcome = {SPINDLE_CHILD_SUCCEEDED, output_json, NULL, NULL};
    return outcome;
}

static inline spindle_test_child_outcome spindle_test_child_failed(const char *code, const char *message) {
    spindle_test_child_outcome outcome = {SPINDLE_CHILD_FAILED, NULL, code, message};
    return outcome;
}

static inline spindle_test_child_outcome spindle_test_child_cancelled(void) {
    spindle_test_child_outcome outcome = {SPINDLE_CHILD_CANCELLED, NULL, NULL, NULL};
    return outcome;
}

/* An outbound request as the HTTP handler gets it: what the host would send, secrets
 * in place. Valid while the handler runs. */
typedef struct spindle_test_http_request {
    const char *method;
    const char *url; /* scheme://authority/path?query */
    const char *scheme, *authority, *path;
    const spindle_http_header *headers; /* names lower-case */
    size_t header_count;
    const char *body; /* body_len bytes and a NUL */
    size_t body_len;
} spindle_test_http_request;

/* The handler's answer when it returns SPINDLE_HTTP_OK. It starts empty; what the
 * pointers point to must outlive the handler's return (literals do), and is copied. */
typedef struct spindle_test_http_reply {
    uint16_t status; /* 0 is 200 */
    const spindle_http_header *headers;
    size_t header_count;
    const char *body; /* NULL for none */
    size_t body_len;  /* 0 with a body: strlen(body) */
} spindle_test_http_reply;

/* Answers one outbound request: fills `reply` and returns SPINDLE_HTTP_OK, or returns
 * the error the request meets instead (SPINDLE_HTTP_DENIED, SPINDLE_HTTP_TIMEOUT, ...),
 * which reaches the kind the way the host's would. */
typedef spindle_http_error (*spindle_test_http_handler)(const spindle_test_http_request *request,
                                                        spindle_test_http_reply *reply, void *data);

/* ------------------------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------------------- */

static char *spindle__t_dup(const char *text) {
    if (!text) return NULL;
    size_t len = strlen(text);
    char *copy = (char *)spindle__xmalloc(len + 1);
    memcpy(copy, text, len + 1);
    return copy;
}

static char *spindle__t_dupn(const void *bytes, size_t len) {
    char *copy = (char *)spindle__xmalloc(len + 1);
    if (len) memcpy(copy, bytes, len);
    copy[len] = '\0';
    return copy;
}

#define SPINDLE__T_PUSH(array, count, item)                                                        \
    do {                                                                                           \
        (array) = realloc((array), ((count) + 1) * sizeof *(array));                               \
        if (!(array)) abort();                                                                     \
        (array)[(count)++] = (item);                                                               \
    } while (0)

typedef struct spindle__t_pair {
    char *name, *value;
} spindle__t_pair;

typedef struct spindle__t_pairs {
    spindle__t_pair *items;
    size_t count;
} spindle__t_pairs;

static void spindle__t_pairs_set(spindle__t_pairs *pairs, const char *name, const char *value) {
    for (size_t i = 0; i < pairs->count; i++) {
        if (strcmp(pairs->items[i].name, name) == 0) {
            free(pairs->items[i].value);
            pairs->items[i].value = spindle__t_dup(value);
            return;
        }
    }
    spindle__t_pair pair = {spindle__t_dup(name), spindle__t_dup(value)};
    SPINDLE__T_PUSH(pairs->items, pairs->count, pair);
}

static const char *spindle__t_pairs_get(const spindle__t_pairs *pairs, const char *name, size_t len) {
    for (size_t i = 0; i < pairs->count; i++)
        if (strlen(pairs->items[i].name) == len && memcmp(pairs->items[i].name, name, len) == 0)
            return pairs->items[i].value;
    return NULL;
}

static void spindle__t_pairs_clear(spindle__t_pairs *pairs) {
    for (size_t i = 0; i < pairs->count; i++) {
        free(pairs->items[i].name);
        free(pairs->items[i].value);
    }
    free(pairs->items);
    pairs->items = NULL;
    pairs->count = 0;
}

static const char spindle__t_hex_digits[] = "0123456789abcdef";

static cJSON *spindle__t_hex(const uint8_t *bytes, size_t len) {
    char *text = (char *)spindle__xmalloc(2 * len + 1);
    for (size_t i = 0; i < len; i++) {
        text[2 * i] = spindle__t_hex_digits[bytes[i] >> 4];
        text[2 * i + 1] = spindle__t_hex_digits[bytes[i] & 15];
    }
    text[2 * len] = '\0';
    cJSON *json = cJSON_CreateString(text);
    free(text);
    return json;
}

/* Decodes hex into a NUL-terminated malloc'd buffer. */
static char *spindle__t_unhex(const char *hex, size_t *len) {
    size_t n = hex ? strlen(hex) / 2 : 0;
    char *bytes = (char *)spindle__xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        const char *hi = strchr(spindle__t_hex_digits, hex[2 * i]), *lo = strchr(spindle__t_hex_digits, hex[2 * i + 1]);
        bytes[i] = (char)(((hi ? hi - spindle__t_hex_digits : 0) << 4) | (lo ? lo - spindle__t_hex_digits : 0));
    }
    bytes[n] = '\0';
    if (len) *len = n;
    return bytes;
}

static cJSON *spindle__t_text(job_kind_string_t text) {
    char *copy = spindle__t_dupn(text.ptr, text.len);
    cJSON *json = cJSON_CreateString(copy);
    free(copy);
    return json;
}

static char *spindle__t_field(const cJSON *object, const char *name) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsString(item) ? spindle__t_dup(item->valuestring) : NULL;
}

/* A malloc'd WIT string as the host hands one: zero-length ones point nowhere usable. */
static job_kind_string_t spindle__t_wit_text(const char *text, size_t len) {
    job_kind_string_t out = {(uint8_t *)1, len};
    if (len) {
        out.ptr = (uint8_t *)spindle__xmalloc(len);
        memcpy(out.ptr, text, len);
    }
    return out;
}

static job_kind_list_u8_t spindle__t_wit_bytes(const void *bytes, size_t len) {
    job_kind_string_t text = spindle__t_wit_text((const char *)bytes, len);
    job_kind_list_u8_t out = {text.ptr, text.len};
    return out;
}

/* ------------------------------------------------------------------------------------
 * SHA-256 and HMAC, for config.hmac-sha256
 * ---------------------------------------------------------------------------------- */

typedef struct spindle__t_sha256 {
    uint32_t h[8];
    uint8_t block[64];
    size_t used;
    uint64_t bytes;
} spindle__t_sha256;

static const uint32_t spindle__t_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

#define SPINDLE__T_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void spindle__t_sha256_block(spindle__t_sha256 *s) {
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)s->block[4 * i] << 24 | (uint32_t)s->block[4 * i + 1] << 16 |
               (uint32_t)s->block[4 * i + 2] << 8 | s->block[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = SPINDLE__T_ROR(w[i - 15], 7) ^ SPINDLE__T_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = SPINDLE__T_ROR(w[i - 2], 17) ^ SPINDLE__T_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (SPINDLE__T_ROR(v[4], 6) ^ SPINDLE__T_ROR(v[4], 11) ^ SPINDLE__T_ROR(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + spindle__t_k[i] + w[i];
        uint32_t t2 = (SPINDLE__T_ROR(v[0], 2) ^ SPINDLE__T_ROR(v[0], 13) ^ SPINDLE__T_ROR(v[0], 22)) +
                      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof *v);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) s->h[i] += v[i];
}

static void spindle__t_sha256_init(spindle__t_sha256 *s) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->used = 0;
    s->bytes = 0;
}

static void spindle__t_sha256_add(spindle__t_sha256 *s, const void *data, size_t len) {
    const uint8_t *p = (const uint8_t *)data;
    s->bytes += len;
    while (len--) {
        s->block[s->used++] = *p++;
        if (s->used == 64) {
            spindle__t_sha256_block(s);
            s->used = 0;
        }
    }
}

static void spindle__t_sha256_end(spindle__t_sha256 *s, uint8_t out[32]) {
    uint64_t bits = s->bytes * 8;
    uint8_t pad = 0x80, zero = 0, length[8];
    spindle__t_sha256_add(s, &pad, 1);
    while (s->used != 56) spindle__t_sha256_add(s, &zero, 1);
    for (int i = 0; i < 8; i++) length[i] = (uint8_t)(bits >> (56 - 8 * i));
    spindle__t_sha256_add(s, length, 8);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

static void spindle__t_hmac_sha256(const char *key, const void *message, size_t len, uint8_t out[32]) {
    uint8_t block[64] = {0}, inner[32];
    size_t key_len = strlen(key);
    spindle__t_sha256 s;
    if (key_len > 64) {
        spindle__t_sha256_init(&s);
        spindle__t_sha256_add(&s, key, key_len);
        spindle__t_sha256_end(&s, block);
    } else {
        memcpy(block, key, key_len);
    }
    for (int i = 0; i < 64; i++) block[i] ^= 0x36;
    spindle__t_sha256_init(&s);
    spindle__t_sha256_add(&s, block, 64);
    spindle__t_sha256_add(&s, message, len);
    spindle__t_sha256_end(&s, inner);
    for (int i = 0; i < 64; i++) block[i] ^= 0x36 ^ 0x5c;
    spindle__t_sha256_init(&s);
    spindle__t_sha256_add(&s, block, 64);
    spindle__t_sha256_add(&s, inner, 32);
    spindle__t_sha256_end(&s, out);
}

/* ------------------------------------------------------------------------------------
 * Settings
 * ---------------------------------------------------------------------------------- */

typedef struct spindle__t_signal {
    char *name, *body;
} spindle__t_signal;

static struct {
    spindle__t_pairs config, secrets;
    spindle_test_child_handler child_handler;
    void *child_data;
    spindle_test_heartbeat_handler heartbeat;
    void *heartbeat_data;
    spindle_test_http_handler http;
    void *http_data;
    spindle__t_signal *signals;
    size_t signal_count;
    size_t prior_cap;
    bool prior_cap_set;
} spindle__t;

/* Sets the deployment setting `name` that spindle_config_get returns. */
static inline void spindle_test_set_config(const char *name, const char *value) {
    spindle__t_pairs_set(&spindle__t.config, name, value);
}

/* Sets the tenant's secret `name`: spindle_config_secret then returns a placeholder for
 * it, and spindle_config_hmac_sha256 signs with its value. */
static inline void spindle_test_set_secret(const char *name, const char *value) {
    spindle__t_pairs_set(&spindle__t.secrets, name, value);
}

/* Settles the children a run's fan-outs ask for (default: each succeeds with its input
 * as its output). A child whose idempotency key was seen before in the run is that job
 * again, as the host would have it. */
static inline void spindle_test_set_child_handler(spindle_test_child_handler handler, void *data) {
    spindle__t.child_handler = handler;
    spindle__t.child_data = data;
}

/* Answers heartbeats (default: always proceed). `beat` counts from 1 within a call. */
static inline void spindle_test_set_heartbeat(spindle_test_heartbeat_handler handler, void *data) {
    spindle__t.heartbeat = handler;
    spindle__t.heartbeat_data = data;
}

/* Answers the kind's outbound requests (default: none, so each fails with
 * SPINDLE_HTTP_OTHER and a line on the call's stderr). */
static inline void spindle_test_set_http(spindle_test_http_handler handler, void *data) {
    spindle__t.http = handler;
    spindle__t.http_data = data;
}

/* Queues the signal `name` with `body` for the next run; waits take a name's signals in
 * the order sent, each once. */
static inline void spindle_test_send_signal(const char *name, const char *body) {
    spindle__t_signal signal = {spindle__t_dup(name), spindle__t_dup(body ? body : "")};
    SPINDLE__T_PUSH(spindle__t.signals, spindle__t.signal_count, signal);
}

/* Leaves outputs larger than `bytes` out of the steps' `prior`, as a host with a cap
 * does; spindle_prior then has to ask the host's `prior-output`. */
static inline void spindle_test_set_prior_cap(size_t bytes) {
    spindle__t.prior_cap = bytes;
    spindle__t.prior_cap_set = true;
}

/* Forgets every setting, handler and queued signal. */
static inline void spindle_test_reset(void) {
    spindle__t_pairs_clear(&spindle__t.config);
    spindle__t_pairs_clear(&spindle__t.secrets);
    for (size_t i = 0; i < spindle__t.signal_count; i++) {
        free(spindle__t.signals[i].name);
        free(spindle__t.signals[i].body);
    }
    free(spindle__t.signals);
    memset(&spindle__t, 0, sizeof spindle__t);
}

/* ------------------------------------------------------------------------------------
 * The stand-in host: the bindings' imports, served inside a call's process
 * ---------------------------------------------------------------------------------- */

/* A result of an awaited fan-out, kept for the next call's input. */
typedef struct spindle__t_result {
    char *job_id, *kind;
    spindle_child_state state;
    char *output; /* NULL if none */
    size_t output_len;
    char *failure_code, *failure_message;
} spindle__t_result;

/* What one call is asked to do. */
typedef struct spindle__t_request {
    enum { SPINDLE__T_DESCRIBE, SPINDLE__T_STEP, SPINDLE__T_ON_FAILURE, SPINDLE__T_ON_SUCCESS } what;
    const char *step;
    uint32_t attempt;
    const char *cursor;
    const uint8_t *payload;
    size_t payload_len;
    const spindle_test_run *run; /* its outputs so far, and its failure for on-failure */
    spindle_awaited awaited;
    const spindle__t_result *results;
    size_t result_count;
    const char *signal; /* the body, when awaited is SPINDLE_AWAITED_SIGNAL */
} spindle__t_request;

#if defined(__SANITIZE_ADDRESS__)
#define SPINDLE__T_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPINDLE__T_LSAN 1
#endif
#endif
#ifndef SPINDLE__T_LSAN
#define SPINDLE__T_LSAN 0
#else
int __lsan_do_recoverable_leak_check(void);
#endif
/* The exit status of a call that leaked under SPINDLE_TEST_LEAKS. */
#define SPINDLE__T_LEAKED 86
/* The exit status of a call that left wasi:http resources undropped, likewise. */
#define SPINDLE__T_UNDROPPED 87

/* Set in a call's process only. */
static FILE *spindle__t_events;
static const spindle__t_request *spindle__t_call;
static unsigned spindle__t_beats;

static void spindle__t_emit(const char *type, cJSON *body) {
    cJSON *event = cJSON_CreateObject();
    cJSON_AddItemToObject(event, type, body);
    char *line = cJSON_PrintUnformatted(event);
    fprintf(spindle__t_events, "%s\n", line);
    fflush(spindle__t_events); /* kept even if the call traps next */
    free(line);
    cJSON_Delete(event);
}

/* Writes an option<string> or option<list<u8>> where the bindings expect it. */
static void spindle__t_return_option(uint8_t *ret, const void *bytes, size_t len) {
    *ret = bytes != NULL;
    if (!bytes) return;
    job_kind_string_t value = spindle__t_wit_text((const char *)bytes, len);
    *(uint8_t **)(ret + sizeof(void *)) = value.ptr;
    *(size_t *)(ret + 2 * sizeof(void *)) = value.len;
}

void __wasm_import_spindle_job_host_log(int32_t level, uint8_t *message, size_t len);
void __wasm_import_spindle_job_host_log(int32_t level, uint8_t *message, size_t len) {
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "level", level);
    char *text = spindle__t_dupn(message, len);
    cJSON_AddStringToObject(line, "message", text);
    free(text);
    spindle__t_emit("log", line);
}

int32_t __wasm_import_spindle_job_host_heartbeat(int32_t has_progress, uint8_t *cursor, size_t cursor_len,
                                                 int64_t done, int32_t has_total, int64_t total);
int32_t __wasm_import_spindle_job_host_heartbeat(int32_t has_progress, uint8_t *cursor, size_t cursor_len,
                                                 int64_t done, int32_t has_total, int64_t total) {
    cJSON *beat = cJSON_CreateObject();
    if (has_progress) {
        char *text = spindle__t_dupn(cursor, cursor_len);
        cJSON_AddStringToObject(beat, "cursor", text);
        free(text);
        cJSON_AddNumberToObject(beat, "done", (double)done);
        if (has_total) cJSON_AddNumberToObject(beat, "total", (double)total);
    }
    spindle__t_emit("heartbeat", beat);
    spindle__t_beats++;
    if (!spindle__t.heartbeat || !spindle__t_call) return SPINDLE_PROCEED;
    return (int32_t)spindle__t.heartbeat(spindle__t_call->step, spindle__t_call->attempt, spindle__t_beats,
                                         spindle__t.heartbeat_data);
}

void __wasm_import_spindle_job_host_prior_output(uint8_t *step, size_t len, uint8_t *ret);
void __wasm_import_spindle_job_host_prior_output(uint8_t *step, size_t len, uint8_t *ret) {
    const spindle_test_run *run = spindle__t_call ? spindle__t_call->run : NULL;
    for (size_t i = 0; run && i < run->output_count; i++) {
        if (strlen(run->outputs[i].step) == len && memcmp(run->outputs[i].step, step, len) == 0) {
            spindle__t_return_option(ret, run->outputs[i].output, run->outputs[i].len);
            return;
        }
    }
    spindle__t_return_option(ret, NULL, 0);
}

void __wasm_import_spindle_job_config_get(uint8_t *name, size_t len, uint8_t *ret);
void __wasm_import_spindle_job_config_get(uint8_t *name, size_t len, uint8_t *ret) {
    const char *value = spindle__t_pairs_get(&spindle__t.config, (const char *)name, len);
    spindle__t_return_option(ret, value, value ? strlen(value) : 0);
}

void __wasm_import_spindle_job_config_secret(uint8_t *name, size_t len, uint8_t *ret);
void __wasm_import_spindle_job_config_secret(uint8_t *name, size_t len, uint8_t *ret) {
    if (!spindle__t_pairs_get(&spindle__t.secrets, (const char *)name, len)) {
        spindle__t_return_option(ret, NULL, 0);
        return;
    }
    /* Shaped like the host's placeholder; never the value. */
    char *key = spindle__t_dupn(name, len);
    char placeholder[256];
    int n = snprintf(placeholder, sizeof placeholder, "{{spindle-secret:%s:local}}", key);
    free(key);
    spindle__t_return_option(ret, placeholder, n < (int)sizeof placeholder ? (size_t)n : sizeof placeholder - 1);
}

void __wasm_import_spindle_job_config_hmac_sha256(uint8_t *name, size_t len, uint8_t *message, size_t message_len,
                                                  uint8_t *ret);
void __wasm_import_spindle_job_config_hmac_sha256(uint8_t *name, size_t len, uint8_t *message, size_t message_len,
                                                  uint8_t *ret) {
    const char *secret = spindle__t_pairs_get(&spindle__t.secrets, (const char *)name, len);
    if (!secret) {
        spindle__t_return_option(ret, NULL, 0);
        return;
    }
    uint8_t mac[32];
    spindle__t_hmac_sha256(secret, message, message_len, mac);
    spindle__t_return_option(ret, mac, sizeof mac);
}

/* ------------------------------------------------------------------------------------
 * The stand-in host's wasi:http: the calls spindle_http_send makes, answered by the
 * test's handler
 *
 * Handles index a resource table that only grows (a dropped handle stays dead). What
 * the host traps on aborts the call with a line saying so. A request is answered when
 * its response is first asked for, after spindle_http_send has written and finished the
 * body; the first `get` of a future says "not ready" until a pollable of it was
 * blocked on, so the waiting path runs as on a host. Return areas are written at the
 * offsets the bindings read them from (job_kind.c).
 * ---------------------------------------------------------------------------------- */

enum {
    SPINDLE__T_DROPPED,
    SPINDLE__T_FIELDS,
    SPINDLE__T_OUTGOING_REQUEST,
    SPINDLE__T_OUTGOING_BODY,
    SPINDLE__T_OUTPUT_STREAM,
    SPINDLE__T_FUTURE_RESPONSE,
    SPINDLE__T_POLLABLE,
    SPINDLE__T_INCOMING_RESPONSE,
    SPINDLE__T_INCOMING_BODY,
    SPINDLE__T_INPUT_STREAM,
    SPINDLE__T_FUTURE_TRAILERS,
    SPINDLE__T_IO_ERROR,
};

static const char *const spindle__t_resource_names[] = {
    "dropped resource", "fields",       "outgoing-request", "outgoing-body", "output-stream",   "future-incoming-response",
    "pollable",         "incoming-response", "incoming-body", "input-stream", "future-trailers", "error",
};

/* wasi:http error-code cases the stand-in answers with. */
enum {
    SPINDLE__T_CONNECTION_REFUSED = 6,
    SPINDLE__T_CONNECTION_TIMEOUT = 8,
    SPINDLE__T_CONNECTION_LIMIT_REACHED = 11,
    SPINDLE__T_HTTP_REQUEST_DENIED = 15,
    SPINDLE__T_HTTP_REQUEST_BODY_SIZE = 17,
    SPINDLE__T_HTTP_REQUEST_URI_INVALID = 19,
    SPINDLE__T_HTTP_RESPONSE_BODY_SIZE = 28,
    SPINDLE__T_HTTP_PROTOCOL_ERROR = 35,
    SPINDLE__T_INTERNAL_ERROR = 38,
};

/* One request and its answer. */
typedef struct spindle__t_exchange {
    char *method, *scheme, *authority, *path; /* scheme and authority NULL until set */
    spindle__t_pairs headers;                 /* as the kind set them */
    char *body;
    size_t body_len;
    unsigned writes;
    bool has_length; /* content-length given: the body must be that long */
    uint64_t length;
    bool aborted; /* the body was dropped unfinished */
    int code;     /* the error code answered, or -1 */
    const char *code_message; /* internal-error's text */
    uint16_t status;
    spindle__t_pairs reply_headers;
    char *reply;
    size_t reply_len;
} spindle__t_exchange;

typedef struct spindle__t_resource {
    int type;       /* SPINDLE__T_DROPPED once dropped */
    int32_t parent; /* a stream's body, a pollable's future: dropping it first traps */
    size_t exchange;
    spindle__t_pairs fields; /* fields */
    bool immutable;          /* fields a response's headers came in */
    bool taken;  /* a request's body, a body's stream, a response's body, a future's response */
    bool ready;  /* a future a pollable was blocked on */
    size_t read; /* an input stream's position */
    int code;    /* an I/O error's error code */
} spindle__t_resource;

/* Set in a call's process only. */
static spindle__t_resource *spindle__t_resources;
static size_t spindle__t_resource_count;
static spindle__t_exchange *spindle__t_exchanges;
static size_t spindle__t_exchange_count;

__attribute__((noreturn, format(printf, 1, 2))) static void spindle__t_trap(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fputs("spindle_testing: wasi:http: ", stderr);
    vfprintf(stderr, fmt, args);
    fputs(" (a trap on the host)\n", stderr);
    va_end(args);
    abort();
}

static int32_t spindle__t_new(int type, int32_t parent, size_t exchange) {
    spindle__t_resource resource;
    memset(&resource, 0, sizeof resource);
    resource.type = type;
    resource.parent = parent;
    resource.exchange = exchange;
    SPINDLE__T_PUSH(spindle__t_resources, spindle__t_resource_count, resource);
    return (int32_t)spindle__t_resource_count;
}

/* The live resource `handle` of `type` (valid until the next spindle__t_new). */
static spindle__t_resource *spindle__t_get(int32_t handle, int type) {
    if (handle < 1 || (size_t)handle > spindle__t_resource_count || spindle__t_resources[handle - 1].type != type)
        spindle__t_trap("handle %d is not a live %s", (int)handle, spindle__t_resource_names[type]);
    return &spindle__t_resources[handle - 1];
}

static spindle__t_exchange *spindle__t_exchange_of(int32_t handle, int type) {
    return &spindle__t_exchanges[spindle__t_get(handle, type)->exchange];
}

/* Drops `handle` as the host's table does: not while a child of it lives. */
static void spindle__t_drop(int32_t handle, int type) {
    spindle__t_resource *resource = spindle__t_get(handle, type);
    for (size_t i = 0; i < spindle__t_resource_count; i++)
        if (spindle__t_resources[i].type && spindle__t_resources[i].parent == handle)
            spindle__t_trap("%s %d dropped while its %s %zu lives", spindle__t_resource_names[type], (int)handle,
                            spindle__t_resource_names[spindle__t_resources[i].type], i + 1);
    spindle__t_pairs_clear(&resource->fields);
    resource->type = SPINDLE__T_DROPPED;
}

/* Writes the error-code case `tag` at `at`, where the bindings read one. */
static void spindle__t_put_code(uint8_t *at, int tag, const char *message) {
    at[0] = (uint8_t)tag;
    at[8] = 0; /* the case's payload: an option, none */
    if (tag == SPINDLE__T_INTERNAL_ERROR && message) {
        job_kind_string_t text = spindle__t_wit_text(message, strlen(message));
        at[8] = 1;
        *(uint8_t **)(at + 8 + sizeof(void *)) = text.ptr;
        *(size_t *)(at + 8 + 2 * sizeof(void *)) = text.len;
    }
}

static void spindle__t_pairs_add(spindle__t_pairs *pairs, const char *name, size_t name_len, const char *value,
                                 size_t value_len) {
    spindle__t_pair pair = {spindle__t_dupn(name, name_len), spindle__t_dupn(value, value_len)};
    for (char *c = pair.name; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c | 0x20);
    SPINDLE__T_PUSH(pairs->items, pairs->count, pair);
}

static bool spindle__t_token(const uint8_t *text, size_t len) {
    if (!len) return false;
    for (size_t i = 0; i < len; i++)
        if (!((text[i] >= 'a' && text[i] <= 'z') || (text[i] >= 'A' && text[i] <= 'Z') ||
              (text[i] >= '0' && text[i] <= '9') || (text[i] && strchr("!#$%&'*+-.^_`|~", text[i]))))
            return false;
    return true;
}

/* `value` with each secret's placeholder replaced by the secret, as the host does for
 * an allowed request's headers. malloc'd. */
static char *spindle__t_reveal(const char *value) {
    char *text = spindle__t_dup(value);
    for (size_t i = 0; i < spindle__t.secrets.count; i++) {
        char placeholder[256];
        snprintf(placeholder, sizeof placeholder, "{{spindle-secret:%s:local}}", spindle__t.secrets.items[i].name);
        const char *secret = spindle__t.secrets.items[i].value;
        size_t from = 0;
        char *at;
        while ((at = strstr(text + from, placeholder))) {
            size_t before = (size_t)(at - text), after = strlen(at + strlen(placeholder));
            char *next = (char *)spindle__xmalloc(before + strlen(secret) + after + 1);
            memcpy(next, text, before);
            memcpy(next + before, secret, strlen(secret));
            memcpy(next + before + strlen(secret), at + strlen(placeholder), after + 1);
            free(text);
            text = next;
            from = before + strlen(secret);
        }
    }
    return text;
}

/* The request's URL as the host would put it together (scheme https unless set). malloc'd. */
static char *spindle__t_url(const spindle__t_exchange *exchange) {
    const char *scheme = exchange->scheme ? exchange->scheme : "https";
    const char *authority = exchange->authority ? exchange->authority : "";
    const char *path = exchange->path ? exchange->path : "/";
    size_t size = strlen(scheme) + strlen(authority) + strlen(path) + 4;
    char *url = (char *)spindle__xmalloc(size);
    snprintf(url, size, "%s://%s%s", scheme, authority, path);
    return url;
}

/* Records the exchange for the run (and the test): an "http" event. */
static void spindle__t_http_record(const spindle__t_exchange *exchange, const char *url,
                                   const spindle_http_header *headers, size_t count, const char *error) {
    cJSON *call = cJSON_CreateObject();
    cJSON_AddStringToObject(call, "method", exchange->method);
    cJSON_AddStringToObject(call, "url", url);
    cJSON *list = cJSON_AddArrayToObject(call, "headers");
    for (size_t i = 0; i < count; i++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(headers[i].name));
        cJSON_AddItemToArray(pair, cJSON_CreateString(headers[i].value));
        cJSON_AddItemToArray(list, pair);
    }
    cJSON_AddItemToObject(call, "body", spindle__t_hex((const uint8_t *)exchange->body, exchange->body_len));
    cJSON_AddNumberToObject(call, "writes", exchange->writes);
    cJSON_AddNumberToObject(call, "status", exchange->status);
    if (error) cJSON_AddStringToObject(call, "error", error);
    spindle__t_emit("http", call);
}

/* Asks the handler (once) and keeps its answer on the exchange. */
static void spindle__t_answer(size_t index) {
    spindle__t_exchange *exchange = &spindle__t_exchanges[index];
    const char *scheme = exchange->scheme ? exchange->scheme : "https";
    const char *authority = exchange->authority ? exchange->authority : "";
    const char *path = exchange->path ? exchange->path : "/";
    char *url = spindle__t_url(exchange);
    size_t count = exchange->headers.count;
    spindle_http_header *headers = (spindle_http_header *)spindle__xmalloc((count ? count : 1) * sizeof *headers);
    for (size_t i = 0; i < count; i++) {
        headers[i].name = exchange->headers.items[i].name;
        headers[i].value = spindle__t_reveal(exchange->headers.items[i].value);
    }
    spindle_http_error err;
    if (exchange->aborted) {
        /* The host's request fails under a body the guest gave up on. */
        err = SPINDLE_HTTP_OTHER;
        exchange->code = SPINDLE__T_HTTP_PROTOCOL_ERROR;
    } else {
        spindle_test_http_request request = {exchange->method, url, scheme, authority, path, headers, count,
                                             exchange->body ? exchange->body : "", exchange->body_len};
        spindle_test_http_reply reply;
        memset(&reply, 0, sizeof reply);
        err = spindle__t.http(&request, &reply, spindle__t.http_data);
        static const int codes[] = {-1,
                                    SPINDLE__T_HTTP_REQUEST_DENIED,
                                    SPINDLE__T_HTTP_REQUEST_URI_INVALID,
                                    SPINDLE__T_CONNECTION_TIMEOUT,
                                    SPINDLE__T_HTTP_RESPONSE_BODY_SIZE,
                                    SPINDLE__T_CONNECTION_LIMIT_REACHED,
                                    SPINDLE__T_CONNECTION_REFUSED,
                                    SPINDLE__T_INTERNAL_ERROR};
        if ((unsigned)err >= sizeof codes / sizeof *codes) err = SPINDLE_HTTP_OTHER;
        exchange->code = codes[err];
        exchange->code_message = "the test's handler answered SPINDLE_HTTP_OTHER";
        if (!err) {
            exchange->status = reply.status ? reply.status : 200;
            for (size_t i = 0; i < reply.header_count; i++) {
                const spindle_http_header *header = &reply.headers[i];
                const char *value = header->value ? header->value : "";
                spindle__t_pairs_add(&exchange->reply_headers, header->name, strlen(header->name), value,
                                     strlen(value));
            }
            exchange->reply_len = reply.body ? (reply.body_len ? reply.body_len : strlen(reply.body)) : 0;
            exchange->reply = spindle__t_dupn(reply.body ? reply.body : "", exchange->reply_len);
        }
    }
    spindle__t_http_record(exchange, url, headers, count, err ? spindle_http_error_name(err) : NULL);
    for (size_t i = 0; i < count; i++) free((char *)headers[i].value);
    free(headers);
    free(url);
}

/* Whether the call left resources undropped (said on stderr). */
static bool spindle__t_undropped(void) {
    bool any = false;
    for (size_t i = 0; i < spindle__t_resource_count; i++) {
        if (!spindle__t_resources[i].type) continue;
        fprintf(stderr, "%s %s %zu", any ? "," : "spindle_testing: the call left wasi:http resources undropped:",
                spindle__t_resource_names[spindle__t_resources[i].type], i + 1);
        any = true;
    }
    if (any) fputc('\n', stderr);
    return any;
}

/* fields */

int32_t __wasm_import_wasi_http_types_constructor_fields(void);
int32_t __wasm_import_wasi_http_types_constructor_fields(void) {
    return spindle__t_new(SPINDLE__T_FIELDS, 0, 0);
}

void __wasm_import_wasi_http_types_method_fields_append(int32_t self, uint8_t *name, size_t name_len, uint8_t *value,
                                                        size_t value_len, uint8_t *ret);
void __wasm_import_wasi_http_types_method_fields_append(int32_t self, uint8_t *name, size_t name_len, uint8_t *value,
                                                        size_t value_len, uint8_t *ret) {
    /* What the host refuses a guest (wasmtime-wasi-http's DEFAULT_FORBIDDEN_HEADERS). */
    static const char *const forbidden[] = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                                            "proxy-connection", "transfer-encoding", "upgrade", "host",
                                            "http2-settings"};
    spindle__t_resource *fields = spindle__t_get(self, SPINDLE__T_FIELDS);
    int problem = -1;
    if (fields->immutable) problem = WASI_HTTP_TYPES_HEADER_ERROR_IMMUTABLE;
    else if (!spindle__t_token(name, name_len)) problem = WASI_HTTP_TYPES_HEADER_ERROR_INVALID_SYNTAX;
    for (size_t i = 0; problem < 0 && i < sizeof forbidden / sizeof *forbidden; i++)
        if (spindle__http_same_name((const char *)name, name_len, forbidden[i]))
            problem = WASI_HTTP_TYPES_HEADER_ERROR_FORBIDDEN;
    for (size_t i = 0; problem < 0 && i < value_len; i++)
        if ((value[i] < ' ' && value[i] != '\t') || value[i] == 0x7f) problem = WASI_HTTP_TYPES_HEADER_ERROR_INVALID_SYNTAX;
    ret[0] = problem >= 0;
    ret[1] = (uint8_t)(problem >= 0 ? problem : 0);
    if (problem < 0) spindle__t_pairs_add(&fields->fields, (const char *)name, name_len, (const char *)value, value_len);
}

void __wasm_import_wasi_http_types_method_fields_entries(int32_t self, uint8_t *ret);
void __wasm_import_wasi_http_types_method_fields_entries(int32_t self, uint8_t *ret) {
    const spindle__t_pairs *fields = &spindle__t_get(self, SPINDLE__T_FIELDS)->fields;
    wasi_http_types_tuple2_field_name_field_value_t *list =
        fields->count ? (wasi_http_types_tuple2_field_name_field_value_t *)spindle__xmalloc(fields->count * sizeof *list)
                      : NULL;
    for (size_t i = 0; i < fields->count; i++) {
        const spindle__t_pair *pair = &fields->items[i];
        job_kind_string_t value = spindle__t_wit_text(pair->value, strlen(pair->value));
        list[i].f0 = spindle__t_wit_text(pair->name, strlen(pair->name));
        list[i].f1.ptr = value.ptr;
        list[i].f1.len = value.len;
    }
    *(uint8_t **)ret = (uint8_t *)list;
    *(size_t *)(ret + sizeof(void *)) = fields->count;
}

void __wasm_import_wasi_http_types_fields_drop(int32_t handle);
void __wasm_import_wasi_http_types_fields_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_FIELDS);
}

/* outgoing-request */

int32_t __wasm_import_wasi_http_types_constructor_outgoing_request(int32_t headers);
int32_t __wasm_import_wasi_http_types_constructor_outgoing_request(int32_t headers) {
    spindle__t_exchange exchange;
    memset(&exchange, 0, sizeof exchange);
    exchange.method = spindle__t_dup("GET");
    exchange.code = -1;
    spindle__t_resource *fields = spindle__t_get(headers, SPINDLE__T_FIELDS);
    exchange.headers = fields->fields; /* the request takes the fields over */
    memset(&fields->fields, 0, sizeof fields->fields);
    spindle__t_drop(headers, SPINDLE__T_FIELDS);
    SPINDLE__T_PUSH(spindle__t_exchanges, spindle__t_exchange_count, exchange);
    return spindle__t_new(SPINDLE__T_OUTGOING_REQUEST, 0, spindle__t_exchange_count - 1);
}

int32_t __wasm_import_wasi_http_types_method_outgoing_request_set_method(int32_t self, int32_t tag, uint8_t *other,
                                                                         size_t len);
int32_t __wasm_import_wasi_http_types_method_outgoing_request_set_method(int32_t self, int32_t tag, uint8_t *other,
                                                                         size_t len) {
    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    spindle__t_exchange *exchange = spindle__t_exchange_of(self, SPINDLE__T_OUTGOING_REQUEST);
    if (tag < 0 || tag > WASI_HTTP_TYPES_METHOD_OTHER) spindle__t_trap("no method case %d", (int)tag);
    if (tag == WASI_HTTP_TYPES_METHOD_OTHER && !spindle__t_token(other, len)) return 1;
    free(exchange->method);
    exchange->method = tag == WASI_HTTP_TYPES_METHOD_OTHER ? spindle__t_dupn(other, len) : spindle__t_dup(methods[tag]);
    return 0;
}

int32_t __wasm_import_wasi_http_types_method_outgoing_request_set_scheme(int32_t self, int32_t is_some, int32_t tag,
                                                                         uint8_t *other, size_t len);
int32_t __wasm_import_wasi_http_types_method_outgoing_request_set_scheme(int32_t self, int32_t is_some, int32_t tag,
                                                                         uint8_t *other, size_t len) {
    spindle__t_exchange *exchange = spindle__t_exchange_of(self, SPINDLE__T_OUTGOING_REQUEST);
    if (is_some && tag == WASI_HTTP_TYPES_SCHEME_OTHER && !spindle__t_token(other, len)) return 1;
    free(exchange->scheme);
    exchange->scheme = !is_some                               ? NULL
                       : tag == WASI_HTTP_TYPES_SCHEME_HTTP  ? spindle__t_dup("http")
                       : tag == WASI_HTTP_TYPES_SCHEME_HTTPS ? spindle__t_dup("https")
                                                             : spindle__t_dupn(other, len);
    return 0;
}

/* Text a URI part may hold: no whitespace or control characters, none of `stop`. */
static bool spindle__t_uri_part(const uint8_t *text, size_t len, const char *stop) {
    for (size_t i = 0; i < len; i++)
        if (text[i] <= ' ' || text[i] == 0x7f || strchr(stop, text[i])) return false;
    return true;
}

int32_t __wasm_import_wasi_http_types_method_outgoing_request_set_authority(int32_t self, int32_t is_some,
                                                                            uint8_t *text, size_t len);
int32_t __wasm_import_wasi_http_types_method_outgoing_request_set_authority(int32_t self, int32_t is_some,
                                                                            uint8_t *text, size_t len) {
    spindle__t_exchange *exchange = spindle__t_exchange_of(self, SPINDLE__T_OUTGOING_REQUEST);
    if (is_some && (!len || !spindle__t_uri_part(text, len, "/?#"))) return 1;
    free(exchange->authority);
    exchange->authority = is_some ? spindle__t_dupn(text, len) : NULL;
    return 0;
}

int32_t __wasm_import_wasi_http_types_method_outgoing_request_set_path_with_query(int32_t self, int32_t is_some,
                                                                                  uint8_t *text, size_t len);
int32_t __wasm_import_wasi_http_types_method_outgoing_request_set_path_with_query(int32_t self, int32_t is_some,
                                                                                  uint8_t *text, size_t len) {
    spindle__t_exchange *exchange = spindle__t_exchange_of(self, SPINDLE__T_OUTGOING_REQUEST);
    if (is_some && (!len || text[0] != '/' || !spindle__t_uri_part(text, len, "#"))) return 1;
    free(exchange->path);
    exchange->path = is_some ? spindle__t_dupn(text, len) : NULL;
    return 0;
}

void __wasm_import_wasi_http_types_method_outgoing_request_body(int32_t self, uint8_t *ret);
void __wasm_import_wasi_http_types_method_outgoing_request_body(int32_t self, uint8_t *ret) {
    spindle__t_resource *request = spindle__t_get(self, SPINDLE__T_OUTGOING_REQUEST);
    ret[0] = request->taken;
    if (request->taken) return;
    request->taken = true;
    *(int32_t *)(ret + 4) = spindle__t_new(SPINDLE__T_OUTGOING_BODY, 0, request->exchange);
}

void __wasm_import_wasi_http_types_outgoing_request_drop(int32_t handle);
void __wasm_import_wasi_http_types_outgoing_request_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_OUTGOING_REQUEST);
}

/* outgoing-handler */

void __wasm_import_wasi_http_outgoing_handler_handle(int32_t request, int32_t has_options, int32_t options,
                                                     uint8_t *ret);
void __wasm_import_wasi_http_outgoing_handler_handle(int32_t request, int32_t has_options, int32_t options,
                                                     uint8_t *ret) {
    (void)options;
    if (has_options) spindle__t_trap("request options are not served by the local runner");
    size_t index = spindle__t_get(request, SPINDLE__T_OUTGOING_REQUEST)->exchange;
    spindle__t_drop(request, SPINDLE__T_OUTGOING_REQUEST); /* handle takes it over */
    spindle__t_exchange *exchange = &spindle__t_exchanges[index];
    for (size_t i = 0; i < exchange->headers.count; i++) {
        if (strcmp(exchange->headers.items[i].name, "content-length") != 0) continue;
        char *end;
        exchange->length = strtoull(exchange->headers.items[i].value, &end, 10);
        exchange->has_length = *exchange->headers.items[i].value && !*end;
    }
    memset(ret, 0, 24 + 4 * sizeof(void *));
    if (!exchange->authority) {
        ret[0] = 1;
        spindle__t_put_code(ret + 8, SPINDLE__T_HTTP_REQUEST_URI_INVALID, NULL);
        return;
    }
    if (!spindle__t.http) { /* recorded as asked for, before any body */
        char *url = spindle__t_url(exchange);
        fprintf(stderr, "spindle_testing: no HTTP handler answers %s %s (set one with spindle_test_set_http)\n",
                exchange->method, url);
        spindle__t_http_record(exchange, url, NULL, 0, "other");
        free(url);
        ret[0] = 1;
        spindle__t_put_code(ret + 8, SPINDLE__T_INTERNAL_ERROR, "no HTTP handler in the local runner");
        return;
    }
    *(int32_t *)(ret + 8) = spindle__t_new(SPINDLE__T_FUTURE_RESPONSE, 0, index);
}

/* outgoing-body and its output-stream */

void __wasm_import_wasi_http_types_method_outgoing_body_write(int32_t self, uint8_t *ret);
void __wasm_import_wasi_http_types_method_outgoing_body_write(int32_t self, uint8_t *ret) {
    spindle__t_resource *body = spindle__t_get(self, SPINDLE__T_OUTGOING_BODY);
    ret[0] = body->taken;
    if (body->taken) return;
    body->taken = true;
    *(int32_t *)(ret + 4) = spindle__t_new(SPINDLE__T_OUTPUT_STREAM, self, body->exchange);
}

void __wasm_import_wasi_io_streams_method_output_stream_blocking_write_and_flush(int32_t self, uint8_t *bytes,
                                                                                 size_t len, uint8_t *ret);
void __wasm_import_wasi_io_streams_method_output_stream_blocking_write_and_flush(int32_t self, uint8_t *bytes,
                                                                                 size_t len, uint8_t *ret) {
    size_t index = spindle__t_get(self, SPINDLE__T_OUTPUT_STREAM)->exchange;
    spindle__t_exchange *exchange = &spindle__t_exchanges[index];
    if (len > 4096) spindle__t_trap("blocking-write-and-flush was given %zu bytes; it takes at most 4096", len);
    memset(ret, 0, 12);
    if (exchange->has_length && exchange->body_len + len > exchange->length) {
        int32_t error = spindle__t_new(SPINDLE__T_IO_ERROR, 0, index);
        spindle__t_resources[error - 1].code = SPINDLE__T_HTTP_REQUEST_BODY_SIZE;
        ret[0] = 1;
        ret[4] = WASI_IO_STREAMS_STREAM_ERROR_LAST_OPERATION_FAILED;
        *(int32_t *)(ret + 8) = error;
        return;
    }
    exchange->body = (char *)realloc(exchange->body, exchange->body_len + len + 1);
    if (!exchange->body) abort();
    if (len) memcpy(exchange->body + exchange->body_len, bytes, len);
    exchange->body_len += len;
    exchange->body[exchange->body_len] = '\0';
    exchange->writes++;
}

void __wasm_import_wasi_io_streams_output_stream_drop(int32_t handle);
void __wasm_import_wasi_io_streams_output_stream_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_OUTPUT_STREAM);
}

void __wasm_import_wasi_http_types_static_outgoing_body_finish(int32_t self, int32_t has_trailers, int32_t trailers,
                                                               uint8_t *ret);
void __wasm_import_wasi_http_types_static_outgoing_body_finish(int32_t self, int32_t has_trailers, int32_t trailers,
                                                               uint8_t *ret) {
    spindle__t_exchange *exchange = spindle__t_exchange_of(self, SPINDLE__T_OUTGOING_BODY);
    spindle__t_drop(self, SPINDLE__T_OUTGOING_BODY); /* traps while its stream lives */
    if (has_trailers) spindle__t_drop(trailers, SPINDLE__T_FIELDS);
    memset(ret, 0, 24 + 4 * sizeof(void *));
    if (exchange->has_length && exchange->body_len != exchange->length) {
        ret[0] = 1;
        spindle__t_put_code(ret + 8, SPINDLE__T_HTTP_REQUEST_BODY_SIZE, NULL);
    }
}

void __wasm_import_wasi_http_types_outgoing_body_drop(int32_t handle);
void __wasm_import_wasi_http_types_outgoing_body_drop(int32_t handle) {
    spindle__t_exchange_of(handle, SPINDLE__T_OUTGOING_BODY)->aborted = true;
    spindle__t_drop(handle, SPINDLE__T_OUTGOING_BODY);
}

/* future-incoming-response and pollables */

int32_t __wasm_import_wasi_http_types_method_future_incoming_response_subscribe(int32_t self);
int32_t __wasm_import_wasi_http_types_method_future_incoming_response_subscribe(int32_t self) {
    size_t index = spindle__t_get(self, SPINDLE__T_FUTURE_RESPONSE)->exchange;
    return spindle__t_new(SPINDLE__T_POLLABLE, self, index);
}

void __wasm_import_wasi_io_poll_method_pollable_block(int32_t self);
void __wasm_import_wasi_io_poll_method_pollable_block(int32_t self) {
    int32_t parent = spindle__t_get(self, SPINDLE__T_POLLABLE)->parent;
    spindle__t_resources[parent - 1].ready = true; /* the answer is there at once */
}

int32_t __wasm_import_wasi_io_poll_method_pollable_ready(int32_t self);
int32_t __wasm_import_wasi_io_poll_method_pollable_ready(int32_t self) {
    __wasm_import_wasi_io_poll_method_pollable_block(self);
    return 1;
}

void __wasm_import_wasi_io_poll_pollable_drop(int32_t handle);
void __wasm_import_wasi_io_poll_pollable_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_POLLABLE);
}

void __wasm_import_wasi_http_types_method_future_incoming_response_get(int32_t self, uint8_t *ret);
void __wasm_import_wasi_http_types_method_future_incoming_response_get(int32_t self, uint8_t *ret) {
    spindle__t_resource *future = spindle__t_get(self, SPINDLE__T_FUTURE_RESPONSE);
    memset(ret, 0, 40 + 4 * sizeof(void *));
    if (!future->ready) return; /* none yet: wait on it first */
    ret[0] = 1;
    if (future->taken) {
        ret[8] = 1; /* the response was already taken */
        return;
    }
    future->taken = true;
    size_t index = future->exchange;
    spindle__t_answer(index);
    const spindle__t_exchange *exchange = &spindle__t_exchanges[index];
    if (exchange->code >= 0) {
        ret[16] = 1;
        spindle__t_put_code(ret + 24, exchange->code, exchange->code_message);
        return;
    }
    *(int32_t *)(ret + 24) = spindle__t_new(SPINDLE__T_INCOMING_RESPONSE, 0, index);
}

void __wasm_import_wasi_http_types_future_incoming_response_drop(int32_t handle);
void __wasm_import_wasi_http_types_future_incoming_response_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_FUTURE_RESPONSE);
}

/* incoming-response, incoming-body and its input-stream */

int32_t __wasm_import_wasi_http_types_method_incoming_response_status(int32_t self);
int32_t __wasm_import_wasi_http_types_method_incoming_response_status(int32_t self) {
    return spindle__t_exchange_of(self, SPINDLE__T_INCOMING_RESPONSE)->status;
}

int32_t __wasm_import_wasi_http_types_method_incoming_response_headers(int32_t self);
int32_t __wasm_import_wasi_http_types_method_incoming_response_headers(int32_t self) {
    size_t index = spindle__t_get(self, SPINDLE__T_INCOMING_RESPONSE)->exchange;
    int32_t handle = spindle__t_new(SPINDLE__T_FIELDS, 0, index);
    spindle__t_resource *fields = &spindle__t_resources[handle - 1];
    const spindle__t_pairs *reply = &spindle__t_exchanges[index].reply_headers;
    for (size_t i = 0; i < reply->count; i++)
        spindle__t_pairs_add(&fields->fields, reply->items[i].name, strlen(reply->items[i].name),
                             reply->items[i].value, strlen(reply->items[i].value));
    fields->immutable = true;
    return handle;
}

void __wasm_import_wasi_http_types_method_incoming_response_consume(int32_t self, uint8_t *ret);
void __wasm_import_wasi_http_types_method_incoming_response_consume(int32_t self, uint8_t *ret) {
    spindle__t_resource *response = spindle__t_get(self, SPINDLE__T_INCOMING_RESPONSE);
    ret[0] = response->taken;
    if (response->taken) return;
    response->taken = true;
    *(int32_t *)(ret + 4) = spindle__t_new(SPINDLE__T_INCOMING_BODY, 0, response->exchange);
}

void __wasm_import_wasi_http_types_incoming_response_drop(int32_t handle);
void __wasm_import_wasi_http_types_incoming_response_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_INCOMING_RESPONSE);
}

void __wasm_import_wasi_http_types_method_incoming_body_stream(int32_t self, uint8_t *ret);
void __wasm_import_wasi_http_types_method_incoming_body_stream(int32_t self, uint8_t *ret) {
    spindle__t_resource *body = spindle__t_get(self, SPINDLE__T_INCOMING_BODY);
    ret[0] = body->taken;
    if (body->taken) return;
    body->taken = true;
    *(int32_t *)(ret + 4) = spindle__t_new(SPINDLE__T_INPUT_STREAM, self, body->exchange);
}

void __wasm_import_wasi_io_streams_method_input_stream_blocking_read(int32_t self, int64_t len, uint8_t *ret);
void __wasm_import_wasi_io_streams_method_input_stream_blocking_read(int32_t self, int64_t len, uint8_t *ret) {
    spindle__t_resource *stream = spindle__t_get(self, SPINDLE__T_INPUT_STREAM);
    const spindle__t_exchange *exchange = &spindle__t_exchanges[stream->exchange];
    memset(ret, 0, 3 * sizeof(void *));
    size_t left = exchange->reply_len - stream->read;
    if (!left) {
        ret[0] = 1;
        ret[sizeof(void *)] = WASI_IO_STREAMS_STREAM_ERROR_CLOSED;
        return;
    }
    /* In pieces, as a network delivers a body. */
    size_t n = left < 8192 ? left : 8192;
    if ((uint64_t)len < n) n = (size_t)len;
    job_kind_string_t piece = spindle__t_wit_text(exchange->reply + stream->read, n);
    stream->read += n;
    *(uint8_t **)(ret + sizeof(void *)) = piece.ptr;
    *(size_t *)(ret + 2 * sizeof(void *)) = piece.len;
}

void __wasm_import_wasi_io_streams_input_stream_drop(int32_t handle);
void __wasm_import_wasi_io_streams_input_stream_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_INPUT_STREAM);
}

int32_t __wasm_import_wasi_http_types_static_incoming_body_finish(int32_t self);
int32_t __wasm_import_wasi_http_types_static_incoming_body_finish(int32_t self) {
    spindle__t_drop(self, SPINDLE__T_INCOMING_BODY); /* traps while its stream lives */
    return spindle__t_new(SPINDLE__T_FUTURE_TRAILERS, 0, 0);
}

void __wasm_import_wasi_http_types_incoming_body_drop(int32_t handle);
void __wasm_import_wasi_http_types_incoming_body_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_INCOMING_BODY);
}

void __wasm_import_wasi_http_types_future_trailers_drop(int32_t handle);
void __wasm_import_wasi_http_types_future_trailers_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_FUTURE_TRAILERS);
}

/* I/O errors */

void __wasm_import_wasi_http_types_http_error_code(int32_t error, uint8_t *ret);
void __wasm_import_wasi_http_types_http_error_code(int32_t error, uint8_t *ret) {
    int code = spindle__t_get(error, SPINDLE__T_IO_ERROR)->code;
    memset(ret, 0, 24 + 4 * sizeof(void *));
    ret[0] = 1;
    spindle__t_put_code(ret + 8, code, NULL);
}

void __wasm_import_wasi_io_error_method_error_to_debug_string(int32_t self, uint8_t *ret);
void __wasm_import_wasi_io_error_method_error_to_debug_string(int32_t self, uint8_t *ret) {
    char text[64];
    snprintf(text, sizeof text, "wasi:http error code %d", spindle__t_get(self, SPINDLE__T_IO_ERROR)->code);
    job_kind_string_t string = spindle__t_wit_text(text, strlen(text));
    *(uint8_t **)ret = string.ptr;
    *(size_t *)(ret + sizeof(void *)) = string.len;
}

void __wasm_import_wasi_io_error_error_drop(int32_t handle);
void __wasm_import_wasi_io_error_error_drop(int32_t handle) {
    spindle__t_drop(handle, SPINDLE__T_IO_ERROR);
}

/* What the generated stubs for the world's other imports (the rest of wasi:http, ...)
 * call. */
__attribute__((noreturn)) void spindle__test_unavailable(const char *import);
__attribute__((noreturn)) void spindle__test_unavailable(const char *import) {
    fprintf(stderr, "spindle_testing: the local runner does not serve the import %s\n", import);
    abort();
}

/* ------------------------------------------------------------------------------------
 * Calling the kind through its export glue
 * ---------------------------------------------------------------------------------- */

uint8_t *__wasm_export_exports_spindle_job_kind_describe(void);
void __wasm_export_exports_spindle_job_kind_describe_post_return(uint8_t *ret);
uint8_t *__wasm_export_exports_spindle_job_kind_run_step(uint8_t *arg);
void __wasm_export_exports_spindle_job_kind_run_step_post_return(uint8_t *ret);
uint8_t *__wasm_export_exports_spindle_job_kind_on_failure(uint8_t *, size_t, uint8_t *, size_t, uint8_t *, size_t,
                                                          int32_t, uint8_t *, size_t, uint8_t *, size_t);
void __wasm_export_exports_spindle_job_kind_on_failure_post_return(uint8_t *ret);
uint8_t *__wasm_export_exports_spindle_job_kind_on_success(uint8_t *, size_t, uint8_t *, size_t, uint8_t *, size_t,
                                                          int32_t, uint8_t *, size_t, uint8_t *, size_t);
void __wasm_export_exports_spindle_job_kind_on_success_post_return(uint8_t *ret);

static cJSON *spindle__t_spec_json(const spindle_job_types_kind_spec_t *spec) {
    cJSON *json = cJSON_CreateObject();
    cJSON_AddItemToObject(json, "name", spindle__t_text(spec->name));
    cJSON *steps = cJSON_AddArrayToObject(json, "steps");
    for (size_t i = 0; i < spec->steps.len; i++) {
        cJSON *step = cJSON_CreateObject();
        cJSON_AddItemToObject(step, "key", spindle__t_text(spec->steps.ptr[i].key));
        cJSON_AddNumberToObject(step, "weight", spec->steps.ptr[i].weight);
        if (spec->steps.ptr[i].output_schema.is_some)
            cJSON_AddItemToObject(step, "output_schema", spindle__t_text(spec->steps.ptr[i].output_schema.val));
        cJSON_AddItemToArray(steps, step);
    }
    cJSON_AddBoolToObject(json, "cancellable", spec->cancellable);
    cJSON_AddNumberToObject(json, "max_attempts", spec->retry.max_attempts);
    cJSON_AddNumberToObject(json, "initial_backoff_ms", spec->retry.initial_backoff_ms);
    cJSON_AddNumberToObject(json, "max_backoff_ms", spec->retry.max_backoff_ms);
    cJSON_AddBoolToObject(json, "has_failure_effect", spec->has_failure_effect);
    cJSON_AddBoolToObject(json, "notifies_on_success", spec->notifies_on_success);
    if (spec->input_schema.is_some) cJSON_AddItemToObject(json, "input_schema", spindle__t_text(spec->input_schema.val));
    return json;
}

static void spindle__t_add_cursor(cJSON *json, const job_kind_option_string_t *cursor) {
    if (cursor->is_some) cJSON_AddItemToObject(json, "cursor", spindle__t_text(cursor->val));
}

static cJSON *spindle__t_outcome_json(const spindle_job_types_step_outcome_t *outcome) {
    static const char *const types[] = {"complete", "skip", "retryable", "refused",
                                        "more", "snooze", "await-children", "await-signal"};
    static const char *const priorities[] = {"critical", "scheduled", "normal", "background"};
    cJSON *json = cJSON_CreateObject();
    cJSON_AddStringToObject(json, "type", outcome->tag < 8 ? types[outcome->tag] : "unknown");
    switch (outcome->tag) {
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_COMPLETE:
        cJSON_AddItemToObject(json, "output", spindle__t_hex(outcome->val.complete.ptr, outcome->val.complete.len));
        break;
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_SKIP:
        cJSON_AddItemToObject(json, "reason", spindle__t_text(outcome->val.skip));
        break;
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_RETRYABLE:
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_REFUSED: {
        const spindle_job_types_failure_t *failure =
            outcome->tag == SPINDLE_JOB_TYPES_STEP_OUTCOME_RETRYABLE ? &outcome->val.retryable : &outcome->val.refused;
        cJSON_AddItemToObject(json, "code", spindle__t_text(failure->code));
        cJSON_AddItemToObject(json, "message", spindle__t_text(failure->message));
        break;
    }
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_MORE:
        cJSON_AddItemToObject(json, "cursor", spindle__t_text(outcome->val.more.cursor));
        cJSON_AddNumberToObject(json, "done", (double)outcome->val.more.done);
        if (outcome->val.more.total.is_some) cJSON_AddNumberToObject(json, "total", (double)outcome->val.more.total.val);
        break;
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_SNOOZE:
        cJSON_AddNumberToObject(json, "seconds", outcome->val.snooze);
        break;
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_AWAIT_CHILDREN: {
        const spindle_job_types_fan_out_t *fan_out = &outcome->val.await_children;
        cJSON *children = cJSON_AddArrayToObject(json, "children");
        for (size_t i = 0; i < fan_out->children.len; i++) {
            const spindle_job_types_child_spec_t *spec = &fan_out->children.ptr[i];
            cJSON *child = cJSON_CreateObject();
            cJSON_AddItemToObject(child, "kind", spindle__t_text(spec->kind));
            cJSON_AddItemToObject(child, "input", spindle__t_hex(spec->input.ptr, spec->input.len));
            if (spec->idempotency_key.is_some)
                cJSON_AddItemToObject(child, "idempotency_key", spindle__t_text(spec->idempotency_key.val));
            if (spec->priority.is_some && spec->priority.val < 4)
                cJSON_AddStringToObject(child, "priority", priorities[spec->priority.val]);
            cJSON *keys = cJSON_AddArrayToObject(child, "lease_keys");
            for (size_t k = 0; k < spec->lease_keys.len; k++)
                cJSON_AddItemToArray(keys, spindle__t_text(spec->lease_keys.ptr[k]));
            cJSON_AddItemToArray(children, child);
        }
        if (fan_out->join.tag == SPINDLE_JOB_TYPES_JOIN_COUNT)
            cJSON_AddNumberToObject(json, "join", fan_out->join.val.count);
        else
            cJSON_AddStringToObject(json, "join", fan_out->join.tag == SPINDLE_JOB_TYPES_JOIN_ANY ? "any" : "all");
        cJSON_AddStringToObject(json, "leftover",
                                fan_out->leftover == SPINDLE_JOB_TYPES_LEFTOVER_KEEP ? "keep" : "cancel");
        spindle__t_add_cursor(json, &fan_out->cursor);
        break;
    }
    case SPINDLE_JOB_TYPES_STEP_OUTCOME_AWAIT_SIGNAL:
        cJSON_AddItemToObject(json, "name", spindle__t_text(outcome->val.await_signal.name));
        cJSON_AddNumberToObject(json, "seconds", outcome->val.await_signal.timeout_secs);
        spindle__t_add_cursor(json, &outcome->val.await_signal.cursor);
        break;
    }
    return json;
}

/* The prior outputs (or the summary's outputs) as the host hands them over, capped. */
static spindle_job_types_list_prior_output_t spindle__t_priors(const spindle_test_run *run, bool capped) {
    spindle_job_types_list_prior_output_t list = {(spindle_job_types_prior_output_t *)8, 0};
    if (!run->output_count) return list;
    list.ptr = (spindle_job_types_prior_output_t *)spindle__xmalloc(run->output_count * sizeof *list.ptr);
    for (size_t i = 0; i < run->output_count; i++) {
        const spindle_test_step_output *output = &run->outputs[i];
        if (capped && spindle__t.prior_cap_set && output->len > spindle__t.prior_cap) continue;
        list.ptr[list.len].step = spindle__t_wit_text(output->step, strlen(output->step));
        list.ptr[list.len].output = spindle__t_wit_bytes(output->output, output->len);
        list.len++;
    }
    if (!list.len) { /* every one capped: an empty list owns nothing */
        free(list.ptr);
        list.ptr = (spindle_job_types_prior_output_t *)8;
    }
    return list;
}

static spindle_job_types_step_input_t *spindle__t_step_input(const spindle__t_request *request) {
    spindle_job_types_step_input_t *input = (spindle_job_types_step_input_t *)spindle__xmalloc(sizeof *input);
    memset(input, 0, sizeof *input);
    char key[512];
    snprintf(key, sizeof key, "%s/%s", SPINDLE_TEST_JOB_ID, request->step);
    input->job_id = spindle__t_wit_text(SPINDLE_TEST_JOB_ID, strlen(SPINDLE_TEST_JOB_ID));
    input->step = spindle__t_wit_text(request->step, strlen(request->step));
    input->attempt = request->attempt;
    input->idempotency_key = spindle__t_wit_text(key, strlen(key));
    input->payload = spindle__t_wit_bytes(request->payload, request->payload_len);
    input->prior = spindle__t_priors(request->run, true);
    input->cursor.is_some = request->cursor != NULL;
    if (request->cursor) input->cursor.val = spindle__t_wit_text(request->cursor, strlen(request->cursor));
    spindle_job_types_option_awaited_t *awaited = &input->awaited;
    switch (request->awaited) {
    case SPINDLE_AWAITED_NOTHING: break;
    case SPINDLE_AWAITED_SIGNAL:
        awaited->is_some = true;
        awaited->val.tag = SPINDLE_JOB_TYPES_AWAITED_SIGNAL;
        awaited->val.val.signal = spindle__t_wit_bytes(request->signal, strlen(request->signal));
        break;
    case SPINDLE_AWAITED_SIGNAL_TIMEOUT:
        awaited->is_some = true;
        awaited->val.tag = SPINDLE_JOB_TYPES_AWAITED_SIGNAL_TIMEOUT;
        break;
    case SPINDLE_AWAITED_CHILDREN: {
        awaited->is_some = true;
        awaited->val.tag = SPINDLE_JOB_TYPES_AWAITED_CHILDREN;
        spindle_job_types_list_child_result_t *list = &awaited->val.val.children;
        list->len = request->result_count;
        list->ptr = request->result_count
                        ? (spindle_job_types_child_result_t *)spindle__xmalloc(request->result_count * sizeof *list->ptr)
                        : (spindle_job_types_child_result_t *)8;
        for (size_t i = 0; i < request->result_count; i++) {
            const spindle__t_result *from = &request->results[i];
            spindle_job_types_child_result_t *to = &list->ptr[i];
            memset(to, 0, sizeof *to);
            to->job_id = spindle__t_wit_text(from->job_id, strlen(from->job_id));
            to->kind = spindle__t_wit_text(from->kind, strlen(from->kind));
            to->state.is_some = from->state != SPINDLE_CHILD_OPEN;
            to->state.val = (spindle_job_types_child_state_t)(from->state == SPINDLE_CHILD_OPEN ? 0 : from->state);
            to->output.is_some = from->output != NULL;
            if (from->output) to->output.val = spindle__t_wit_bytes(from->output, from->output_len);
            to->failure.is_some = from->failure_code != NULL;
            if (from->failure_code) {
                const char *message = from->failure_message ? from->failure_message : "";
                to->failure.val.code = spindle__t_wit_text(from->failure_code, strlen(from->failure_code));
                to->failure.val.message = spindle__t_wit_text(message, strlen(message));
            }
        }
        break;
    }
    }
    return input;
}

/* Runs `request` in this (the call's) process; the result as JSON. */
static cJSON *spindle__t_perform(const spindle__t_request *request) {
    switch (request->what) {
    case SPINDLE__T_DESCRIBE: {
        uint8_t *ret = __wasm_export_exports_spindle_job_kind_describe();
        cJSON *spec = spindle__t_spec_json((const spindle_job_types_kind_spec_t *)ret);
        __wasm_export_exports_spindle_job_kind_describe_post_return(ret);
        return spec;
    }
    case SPINDLE__T_STEP: {
        uint8_t *ret = __wasm_export_exports_spindle_job_kind_run_step((uint8_t *)spindle__t_step_input(request));
        cJSON *outcome = spindle__t_outcome_json((const spindle_job_types_step_outcome_t *)ret);
        __wasm_export_exports_spindle_job_kind_run_step_post_return(ret);
        return outcome;
    }
    case SPINDLE__T_ON_FAILURE:
    case SPINDLE__T_ON_SUCCESS: {
        const spindle_test_run *run = request->run;
        job_kind_string_t id = spindle__t_wit_text(SPINDLE_TEST_JOB_ID, strlen(SPINDLE_TEST_JOB_ID));
        job_kind_list_u8_t payload = spindle__t_wit_bytes(request->payload, request->payload_len);
        spindle_job_types_list_prior_output_t outputs = spindle__t_priors(run, false);
        bool failed = request->what == SPINDLE__T_ON_FAILURE && run->failure_code;
        const char *code = failed ? run->failure_code : "", *message = failed ? run->failure_message : "";
        job_kind_string_t code_text = spindle__t_wit_text(code, failed ? strlen(code) : 0);
        job_kind_string_t message_text = spindle__t_wit_text(message, failed && message ? strlen(message) : 0);
        uint8_t *(*hook)(uint8_t *, size_t, uint8_t *, size_t, uint8_t *, size_t, int32_t, uint8_t *, size_t,
                         uint8_t *, size_t) = request->what == SPINDLE__T_ON_FAILURE
                                                  ? __wasm_export_exports_spindle_job_kind_on_failure
                                                  : __wasm_export_exports_spindle_job_kind_on_success;
        uint8_t *ret = hook(id.ptr, id.len, payload.ptr, payload.len, (uint8_t *)outputs.ptr, outputs.len, failed,
                            code_text.ptr, code_text.len, message_text.ptr, message_text.len);
        const exports_spindle_job_kind_result_void_failure_t *result =
            (const exports_spindle_job_kind_result_void_failure_t *)ret;
        cJSON *json = cJSON_CreateObject();
        cJSON_AddBoolToObject(json, "ok", !result->is_err);
        if (result->is_err) {
            cJSON_AddItemToObject(json, "code", spindle__t_text(result->val.err.code));
            cJSON_AddItemToObject(json, "message", spindle__t_text(result->val.err.message));
        }
        if (request->what == SPINDLE__T_ON_FAILURE)
            __wasm_export_exports_spindle_job_kind_on_failure_post_return(ret);
        else
            __wasm_export_exports_spindle_job_kind_on_success_post_return(ret);
        return json;
    }
    }
    return NULL;
}

static char *spindle__t_slurp(FILE *file) {
    fflush(file);
    long size = ftell(file);
    rewind(file);
    char *text = (char *)spindle__xmalloc(size > 0 ? (size_t)size + 1 : 1);
    size_t got = size > 0 ? fread(text, 1, (size_t)size, file) : 0;
    text[got] = '\0';
    return text;
}

static void spindle__t_append(char **text, const char *more) {
    size_t had = *text ? strlen(*text) : 0, add = strlen(more);
    *text = (char *)realloc(*text, had + add + 1);
    if (!*text) abort();
    memcpy(*text + had, more, add + 1);
}

/* Records an "http" event of a call on the run. */
static void spindle__t_read_http(spindle_test_run *run, const cJSON *http, const char *context, uint32_t attempt) {
    spindle_test_http_call call;
    memset(&call, 0, sizeof call);
    call.step = spindle__t_dup(context);
    call.attempt = attempt;
    call.method = spindle__t_field(http, "method");
    call.url = spindle__t_field(http, "url");
    const cJSON *headers = cJSON_GetObjectItemCaseSensitive(http, "headers"), *pair;
    call.headers = (spindle_http_header *)spindle__xmalloc(((size_t)cJSON_GetArraySize(headers) + 1) * sizeof *call.headers);
    cJSON_ArrayForEach(pair, headers) {
        spindle_http_header header = {spindle__t_dup(cJSON_GetStringValue(cJSON_GetArrayItem(pair, 0))),
                                      spindle__t_dup(cJSON_GetStringValue(cJSON_GetArrayItem(pair, 1)))};
        call.headers[call.header_count++] = header;
    }
    char *hex = spindle__t_field(http, "body");
    call.body = spindle__t_unhex(hex, &call.body_len);
    free(hex);
    call.body_writes = (unsigned)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(http, "writes"));
    call.status = (uint16_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(http, "status"));
    call.error = spindle__t_field(http, "error");
    SPINDLE__T_PUSH(run->http_calls, run->http_call_count, call);
}

/* Runs one call in a forked process, as a fresh instance; records its log lines on the
 * run. Returns the call's JSON result, or a fault `{"type":"fault",...}` if it trapped. */
static cJSON *spindle__t_invoke(spindle_test_run *run, const spindle__t_request *request, char **stderr_text,
                                unsigned *heartbeats) {
    FILE *events = tmpfile(), *err = tmpfile();
    if (!events || !err) {
        perror("spindle_testing: tmpfile");
        abort();
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("spindle_testing: fork");
        abort();
    }
    if (pid == 0) {
        dup2(fileno(err), STDERR_FILENO);
        spindle__t_events = events;
        spindle__t_call = request;
        spindle__t_beats = 0;
        cJSON *result = spindle__t_perform(request);
        spindle__t_emit("result", result);
        if (getenv("SPINDLE_TEST_LEAKS") && spindle__t_undropped()) {
            fflush(NULL);
            _exit(SPINDLE__T_UNDROPPED);
        }
        fflush(NULL);
#if SPINDLE__T_LSAN
        /* What the call left allocated once the bindings freed its outcome: the SDK must
         * leave nothing; a kind may (its instance is dropped after each call on a host). */
        if (getenv("SPINDLE_TEST_LEAKS") && __lsan_do_recoverable_leak_check()) _exit(SPINDLE__T_LEAKED);
#endif
        _exit(0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}

    cJSON *result = NULL;
    fflush(events);
    rewind(events);
    char *line = NULL;
    size_t size = 0;
    const char *context = request->step ? request->step
                          : request->what == SPINDLE__T_ON_FAILURE ? "on-failure"
                          : request->what == SPINDLE__T_ON_SUCCESS ? "on-success"
                                                                   : "describe";
    while (getline(&line, &size, events) > 0) {
        cJSON *event = cJSON_Parse(line);
        cJSON *log = cJSON_GetObjectItemCaseSensitive(event, "log");
        if (log) {
            spindle_test_log entry = {spindle__t_dup(context), request->attempt,
                                      (spindle_log_level)cJSON_GetObjectItemCaseSensitive(log, "level")->valueint,
                                      spindle__t_field(log, "message")};
            SPINDLE__T_PUSH(run->logs, run->log_count, entry);
        } else if (cJSON_GetObjectItemCaseSensitive(event, "http")) {
            spindle__t_read_http(run, cJSON_GetObjectItemCaseSensitive(event, "http"), context, request->attempt);
        } else if (cJSON_GetObjectItemCaseSensitive(event, "heartbeat")) {
            if (heartbeats) (*heartbeats)++;
        } else if (cJSON_GetObjectItemCaseSensitive(event, "result")) {
            result = cJSON_DetachItemFromObjectCaseSensitive(event, "result");
        }
        cJSON_Delete(event);
    }
    free(line);
    *stderr_text = spindle__t_slurp(err);
    fclose(events);
    fclose(err);

    if (strstr(*stderr_text, "Sanitizer") || strstr(*stderr_text, "runtime error:"))
        fprintf(stderr, "spindle_testing: a sanitizer reported on a call of %s:\n%s", context, *stderr_text);
    if (result && WIFEXITED(status) && WEXITSTATUS(status) == 0) return result;
    cJSON_Delete(result);
    if (WIFEXITED(status) && WEXITSTATUS(status) == SPINDLE__T_UNDROPPED) {
        cJSON *undropped = cJSON_CreateObject();
        cJSON_AddStringToObject(undropped, "type", "fault");
        cJSON_AddStringToObject(undropped, "code", "test.undropped-resource");
        cJSON_AddStringToObject(undropped, "message", "the call left wasi:http resources undropped (SPINDLE_TEST_LEAKS)");
        return undropped;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == SPINDLE__T_LEAKED) {
        cJSON *leak = cJSON_CreateObject();
        cJSON_AddStringToObject(leak, "type", "fault");
        cJSON_AddStringToObject(leak, "code", "test.leak");
        cJSON_AddStringToObject(leak, "message", "the call left memory allocated (SPINDLE_TEST_LEAKS)");
        return leak;
    }
    /* The host's codes for the ways a guest traps, by the signal that stands for each. */
    const char *code = "sandbox.trap", *message = "the step trapped";
    if (WIFSIGNALED(status)) {
        int signal = WTERMSIG(status);
        if (signal == SIGABRT || signal == SIGILL || signal == SIGTRAP) {
            code = "sandbox.panic";
            message = "the step panicked";
        } else if (signal == SIGSEGV || signal == SIGBUS) {
            code = "sandbox.out-of-bounds";
            message = "the step accessed memory out of bounds (or overflowed its shadow stack)";
        }
    }
    cJSON *fault = cJSON_CreateObject();
    cJSON_AddStringToObject(fault, "type", "fault");
    cJSON_AddStringToObject(fault, "code", code);
    cJSON_AddStringToObject(fault, "message", message);
    return fault;
}

/* ------------------------------------------------------------------------------------
 * The runner
 * ---------------------------------------------------------------------------------- */

static void spindle__t_fail(spindle_test_run *run, const char *step, const char *code, const char *message) {
    run->failure_step = spindle__t_dup(step);
    run->failure_code = spindle__t_dup(code ? code : "");
    run->failure_message = spindle__t_dup(message ? message : "");
}

/* Children created in a run, by idempotency key, so that a key names one job. */
typedef struct spindle__t_known {
    char *key;
    spindle__t_result result; /* what the job is once its join was met */
} spindle__t_known;

static void spindle__t_result_free(spindle__t_result *result) {
    free(result->job_id);
    free(result->kind);
    free(result->output);
    free(result->failure_code);
    free(result->failure_message);
}

static spindle__t_result spindle__t_result_copy(const spindle__t_result *from) {
    spindle__t_result to = *from;
    to.job_id = spindle__t_dup(from->job_id);
    to.kind = spindle__t_dup(from->kind);
    to.output = from->output ? spindle__t_dupn(from->output, from->output_len) : NULL;
    to.failure_code = spindle__t_dup(from->failure_code);
    to.failure_message = spindle__t_dup(from->failure_message);
    return to;
}

static spindle__t_result spindle__t_settle(const char *job_id, const char *kind, const char *input) {
    spindle_test_child_outcome outcome = spindle__t.child_handler
                                             ? spindle__t.child_handler(kind, input, spindle__t.child_data)
                                             : spindle_test_child_succeeded(input);
    spindle__t_result result = {spindle__t_dup(job_id), spindle__t_dup(kind), outcome.state, NULL, 0, NULL, NULL};
    if (outcome.state == SPINDLE_CHILD_SUCCEEDED && outcome.output) {
        result.output = spindle__t_dup(outcome.output);
        result.output_len = strlen(outcome.output);
    }
    if (outcome.state == SPINDLE_CHILD_FAILED) {
        result.failure_code = spindle__t_dup(outcome.failure_code ? outcome.failure_code : "failed");
        result.failure_message = spindle__t_dup(outcome.failure_message ? outcome.failure_message : "");
    }
    return result;
}

/* Creates (or finds) a fan-out's children and settles as many as its join needs. */
static void spindle__t_fan_out(spindle_test_run *run, const spindle_test_call *call, const cJSON *outcome,
                               spindle__t_known **known, size_t *known_count, unsigned *created,
                               spindle__t_result **results, size_t *result_count) {
    const cJSON *children = cJSON_GetObjectItemCaseSensitive(outcome, "children");
    const cJSON *join = cJSON_GetObjectItemCaseSensitive(outcome, "join");
    size_t count = (size_t)cJSON_GetArraySize(children);
    size_t settled = cJSON_IsNumber(join) ? (size_t)join->valuedouble
                     : strcmp(join->valuestring, "any") == 0 ? 1
                                                             : count;
    bool keep = strcmp(cJSON_GetObjectItemCaseSensitive(outcome, "leftover")->valuestring, "keep") == 0;
    for (size_t index = 0; index < count; index++) {
        const cJSON *child = cJSON_GetArrayItem(children, (int)index);
        char *kind = spindle__t_field(child, "kind");
        char *key = spindle__t_field(child, "idempotency_key");
        char *hex = spindle__t_field(child, "input");
        size_t input_len;
        char *input = spindle__t_unhex(hex, &input_len);
        free(hex);
        spindle__t_known *found = NULL;
        for (size_t k = 0; key && k < *known_count; k++)
            if (strcmp((*known)[k].key, key) == 0) found = &(*known)[k];
        spindle__t_result result;
        if (found && found->result.state != SPINDLE_CHILD_OPEN) {
            result = spindle__t_result_copy(&found->result);
        } else {
            char id[64];
            if (found) {
                snprintf(id, sizeof id, "%s", found->result.job_id);
            } else {
                snprintf(id, sizeof id, "00000000-0000-7000-8001-%012x", ++*created);
            }
            if (index < settled) {
                result = spindle__t_settle(id, kind, input);
            } else {
                spindle__t_result open = {spindle__t_dup(id), spindle__t_dup(kind), SPINDLE_CHILD_OPEN,
                                          NULL, 0, NULL, NULL};
                result = open;
            }
            /* What the job is once the join is met: open ones run on, or are cancelled. */
            spindle__t_result after = spindle__t_result_copy(&result);
            if (after.state == SPINDLE_CHILD_OPEN && !keep) after.state = SPINDLE_CHILD_CANCELLED;
            if (found) {
                spindle__t_result_free(&found->result);
                found->result = after;
            } else if (key) {
                spindle__t_known entry = {spindle__t_dup(key), after};
                SPINDLE__T_PUSH(*known, *known_count, entry);
            } else {
                spindle__t_result_free(&after);
            }
        }
        spindle_test_child_run record = {spindle__t_dup(call->step), call->attempt, spindle__t_dup(result.job_id),
                                         kind, input, key, result.state,
                                         result.output ? spindle__t_dup(result.output) : NULL,
                                         spindle__t_dup(result.failure_code)};
        SPINDLE__T_PUSH(run->children, run->child_count, record);
        SPINDLE__T_PUSH(*results, *result_count, result);
    }
}

static void spindle__t_results_free(spindle__t_result **results, size_t *count) {
    for (size_t i = 0; i < *count; i++) spindle__t_result_free(&(*results)[i]);
    free(*results);
    *results = NULL;
    *count = 0;
}

/* Fills a call's convenience fields from its outcome's JSON. */
static void spindle__t_read_outcome(spindle_test_call *call, cJSON *json) {
    call->json = json;
    call->outcome = spindle__t_field(json, "type");
    call->code = spindle__t_field(json, "code");
    call->message = spindle__t_field(json, "message");
    call->reason = spindle__t_field(json, "reason");
    call->next_cursor = spindle__t_field(json, "cursor");
    call->total = SPINDLE_TOTAL_UNKNOWN;
    const cJSON *number;
    if ((number = cJSON_GetObjectItemCaseSensitive(json, "done"))) call->done = (uint64_t)number->valuedouble;
    if ((number = cJSON_GetObjectItemCaseSensitive(json, "total"))) call->total = (int64_t)number->valuedouble;
    if ((number = cJSON_GetObjectItemCaseSensitive(json, "seconds"))) call->seconds = (uint32_t)number->valuedouble;
    if (strcmp(call->outcome, "complete") == 0) {
        char *hex = spindle__t_field(json, "output");
        call->output = spindle__t_unhex(hex, &call->output_len);
        free(hex);
    }
}

/* Runs one job of the kind linked in with `payload` to its end. Free with
 * spindle_test_run_free. */
static inline spindle_test_run *spindle_run_job_bytes(const void *payload, size_t payload_len) {
    spindle_test_run *run = (spindle_test_run *)calloc(1, sizeof *run);
    if (!run) abort();
    spindle__t_request request;
    memset(&request, 0, sizeof request);
    request.payload = (const uint8_t *)payload;
    request.payload_len = payload_len;
    request.run = run;

    char *err = NULL;
    request.what = SPINDLE__T_DESCRIBE;
    run->spec = spindle__t_invoke(run, &request, &err, NULL);
    spindle__t_append(&run->stderr_text, err);
    free(err);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(run->spec, "type");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "fault") == 0) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(run->spec, "code");
        spindle__t_fail(run, "describe", cJSON_IsString(code) ? code->valuestring : "sandbox.trap", "describe trapped");
    }
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(run->spec, "steps");
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(run->spec, "max_attempts");
    uint32_t max_attempts = cJSON_IsNumber(max) && max->valuedouble >= 1 ? (uint32_t)max->valuedouble : 1;

    spindle__t_known *known = NULL;
    size_t known_count = 0;
    unsigned created = 0;
    spindle__t_signal *signals = spindle__t.signals;
    size_t signal_count = spindle__t.signal_count;
    spindle__t.signals = NULL;
    spindle__t.signal_count = 0;

    const cJSON *spec_step;
    cJSON_ArrayForEach(spec_step, steps) {
        if (run->failure_code) break;
        char *key = spindle__t_field(spec_step, "key");
        uint32_t attempt = 1;
        char *cursor = NULL, *signal = NULL;
        spindle__t_result *results = NULL;
        size_t result_count = 0;
        spindle_awaited awaited = SPINDLE_AWAITED_NOTHING;
        bool settled = false;
        for (size_t calls = 1; !settled; calls++) {
            if (calls > SPINDLE_TEST_MAX_CALLS) {
                spindle__t_fail(run, key, "call-limit", "the step did not settle in SPINDLE_TEST_MAX_CALLS calls");
                break;
            }
            request.what = SPINDLE__T_STEP;
            request.step = key;
            request.attempt = attempt;
            request.cursor = cursor;
            request.awaited = awaited;
            request.results = results;
            request.result_count = result_count;
            request.signal = signal;
            spindle_test_call call;
            memset(&call, 0, sizeof call);
            call.step = spindle__t_dup(key);
            call.attempt = attempt;
            call.cursor = spindle__t_dup(cursor);
            call.awaited = awaited;
            spindle__t_read_outcome(&call, spindle__t_invoke(run, &request, &call.stderr_text, &call.heartbeats));
            spindle__t_append(&run->stderr_text, call.stderr_text);
            SPINDLE__T_PUSH(run->calls, run->call_count, call);
            const spindle_test_call *last = &run->calls[run->call_count - 1];

            /* What the next call follows; reset unless an await says otherwise. */
            spindle__t_results_free(&results, &result_count);
            free(signal);
            signal = NULL;
            awaited = SPINDLE_AWAITED_NOTHING;
            const char *outcome = last->outcome;
            if (strcmp(outcome, "complete") == 0) {
                spindle_test_step_output output = {spindle__t_dup(key), spindle__t_dupn(last->output, last->output_len),
                                              last->output_len};
                SPINDLE__T_PUSH(run->outputs, run->output_count, output);
                settled = true;
            } else if (strcmp(outcome, "skip") == 0) {
                settled = true;
            } else if (strcmp(outcome, "more") == 0) {
                free(cursor);
                cursor = spindle__t_dup(last->next_cursor);
            } else if (strcmp(outcome, "snooze") == 0) {
                /* called again at once, same attempt */
            } else if (strcmp(outcome, "retryable") == 0 || strcmp(outcome, "fault") == 0) {
                if (attempt >= max_attempts) {
                    spindle__t_fail(run, key, last->code, last->message);
                    break;
                }
                attempt++;
                free(cursor);
                cursor = NULL;
            } else if (strcmp(outcome, "refused") == 0 || strcmp(outcome, "unknown") == 0) {
                spindle__t_fail(run, key, last->code ? last->code : "sandbox.malformed-output", last->message);
                break;
            } else if (strcmp(outcome, "await-children") == 0) {
                spindle__t_fan_out(run, last, last->json, &known, &known_count, &created, &results, &result_count);
                awaited = SPINDLE_AWAITED_CHILDREN;
                free(cursor);
                cursor = spindle__t_dup(last->next_cursor);
            } else if (strcmp(outcome, "await-signal") == 0) {
                char *name = spindle__t_field(last->json, "name");
                size_t at = 0;
                while (at < signal_count && strcmp(signals[at].name, name) != 0) at++;
                spindle_test_signal_wait wait = {spindle__t_dup(key), attempt, name, last->seconds, NULL};
                if (at < signal_count) {
                    signal = signals[at].body;
                    wait.body = spindle__t_dup(signal);
                    free(signals[at].name);
                    memmove(&signals[at], &signals[at + 1], (signal_count - at - 1) * sizeof *signals);
                    signal_count--;
                    awaited = SPINDLE_AWAITED_SIGNAL;
                } else {
                    awaited = SPINDLE_AWAITED_SIGNAL_TIMEOUT;
                }
                SPINDLE__T_PUSH(run->signal_waits, run->signal_wait_count, wait);
                free(cursor);
                cursor = spindle__t_dup(last->next_cursor);
            }
        }
        spindle__t_results_free(&results, &result_count);
        free(signal);
        free(cursor);
        free(key);
    }
    for (size_t i = 0; i < signal_count; i++) {
        free(signals[i].name);
        free(signals[i].body);
    }
    free(signals);
    for (size_t i = 0; i < known_count; i++) {
        free(known[i].key);
        spindle__t_result_free(&known[i].result);
    }
    free(known);

    run->succeeded = run->failure_code == NULL;
    run->state = run->succeeded ? "succeeded" : "failed";
    const char *flag = run->succeeded ? "notifies_on_success" : "has_failure_effect";
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(run->spec, flag))) {
        request.what = run->succeeded ? SPINDLE__T_ON_SUCCESS : SPINDLE__T_ON_FAILURE;
        request.step = NULL;
        request.attempt = 0;
        run->hook = run->succeeded ? "on-success" : "on-failure";
        cJSON *result = spindle__t_invoke(run, &request, &err, NULL);
        spindle__t_append(&run->stderr_text, err);
        free(err);
        run->hook_ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(result, "ok"));
        run->hook_code = spindle__t_field(result, "code");
        run->hook_message = spindle__t_field(result, "message");
        cJSON_Delete(result);
    }
    return run;
}

/* Runs one call of `step` (attempt `attempt`, with `cursor` or NULL) with `payload` and
 * no prior outputs, for a test of one step; the run holds that one call and its logs. */
static inline spindle_test_run *spindle_test_run_step(const char *step, uint32_t attempt, const char *payload,
                                                      const char *cursor) {
    spindle_test_run *run = (spindle_test_run *)calloc(1, sizeof *run);
    if (!run) abort();
    spindle__t_request request;
    memset(&request, 0, sizeof request);
    request.what = SPINDLE__T_STEP;
    request.step = step;
    request.attempt = attempt;
    request.cursor = cursor;
    request.payload = (const uint8_t *)payload;
    request.payload_len = payload ? strlen(payload) : 0;
    request.run = run;
    spindle_test_call call;
    memset(&call, 0, sizeof call);
    call.step = spindle__t_dup(step);
    call.attempt = attempt;
    call.cursor = spindle__t_dup(cursor);
    spindle__t_read_outcome(&call, spindle__t_invoke(run, &request, &call.stderr_text, &call.heartbeats));
    spindle__t_append(&run->stderr_text, call.stderr_text);
    SPINDLE__T_PUSH(run->calls, run->call_count, call);
    run->state = "called";
    return run;
}

/* Runs one job with `payload` (JSON text, or any text) as its input. */
static inline spindle_test_run *spindle_run_job(const char *payload) {
    return spindle_run_job_bytes(payload, payload ? strlen(payload) : 0);
}

/* A completed step's output (with a NUL after it), or NULL if it did not complete. */
static inline const char *spindle_test_output(const spindle_test_run *run, const char *step) {
    for (size_t i = 0; i < run->output_count; i++)
        if (strcmp(run->outputs[i].step, step) == 0) return run->outputs[i].output;
    return NULL;
}

/* The `n`th call (from 0) of `step`, or NULL. */
static inline const spindle_test_call *spindle_test_call_of(const spindle_test_run *run, const char *step, size_t n) {
    for (size_t i = 0; i < run->call_count; i++)
        if (strcmp(run->calls[i].step, step) == 0 && n-- == 0) return &run->calls[i];
    return NULL;
}

/* How many calls `step` had. */
static inline size_t spindle_test_calls_of(const spindle_test_run *run, const char *step) {
    size_t count = 0;
    for (size_t i = 0; i < run->call_count; i++) count += strcmp(run->calls[i].step, step) == 0;
    return count;
}

/* The first value of header `name` (ASCII case-insensitive) a recorded request was sent
 * with, or NULL. */
static inline const char *spindle_test_http_header(const spindle_test_http_call *call, const char *name) {
    for (size_t i = 0; i < call->header_count; i++)
        if (spindle__http_same_name(call->headers[i].name, strlen(call->headers[i].name), name))
            return call->headers[i].value;
    return NULL;
}

static inline void spindle_test_run_free(spindle_test_run *run) {
    if (!run) return;
    for (size_t i = 0; i < run->call_count; i++) {
        spindle_test_call *call = &run->calls[i];
        free(call->step), free(call->cursor), free(call->outcome), free(call->code), free(call->message);
        free(call->output), free(call->reason), free(call->next_cursor), free(call->stderr_text);
        cJSON_Delete(call->json);
    }
    for (size_t i = 0; i < run->output_count; i++) free(run->outputs[i].step), free(run->outputs[i].output);
    for (size_t i = 0; i < run->log_count; i++) free(run->logs[i].step), free(run->logs[i].message);
    for (size_t i = 0; i < run->child_count; i++) {
        spindle_test_child_run *child = &run->children[i];
        free(child->step), free(child->job_id), free(child->kind), free(child->input);
        free(child->idempotency_key), free(child->output), free(child->failure_code);
    }
    for (size_t i = 0; i < run->signal_wait_count; i++) {
        spindle_test_signal_wait *wait = &run->signal_waits[i];
        free(wait->step), free(wait->name), free(wait->body);
    }
    for (size_t i = 0; i < run->http_call_count; i++) {
        spindle_test_http_call *call = &run->http_calls[i];
        for (size_t h = 0; h < call->header_count; h++)
            free((char *)call->headers[h].name), free((char *)call->headers[h].value);
        free(call->step), free(call->method), free(call->url), free(call->headers), free(call->body), free(call->error);
    }
    free(run->http_calls);
    free(run->calls), free(run->outputs), free(run->logs), free(run->children), free(run->signal_waits);
    free(run->failure_step), free(run->failure_code), free(run->failure_message);
    free(run->hook_code), free(run->hook_message), free(run->stderr_text);
    cJSON_Delete(run->spec);
    free(run);
}

/* ------------------------------------------------------------------------------------
 * A minimal test driver: cases, expectations, a closing "N passed, N failed" line
 * ---------------------------------------------------------------------------------- */

static int spindle__t_passed, spindle__t_failed;
static bool spindle__t_case_failed;

static inline bool spindle__t_expect(bool ok, const char *what, const char *file, int line) {
    if (!ok) {
        fprintf(stderr, "%s:%d: expected %s\n", file, line, what);
        spindle__t_case_failed = true;
    }
    return ok;
}

static inline bool spindle__t_expect_str(const char *actual, const char *expected, const char *what, const char *file,
                                         int line) {
    bool ok = actual && expected ? strcmp(actual, expected) == 0 : actual == expected;
    if (!ok) {
        fprintf(stderr, "%s:%d: %s is %s%s%s, expected %s%s%s\n", file, line, what, actual ? "\"" : "",
                actual ? actual : "NULL", actual ? "\"" : "", expected ? "\"" : "", expected ? expected : "NULL",
                expected ? "\"" : "");
        spindle__t_case_failed = true;
    }
    return ok;
}

static inline bool spindle__t_expect_int(long long actual, long long expected, const char *what, const char *file,
                                         int line) {
    if (actual != expected) {
        fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", file, line, what, actual, expected);
        spindle__t_case_failed = true;
    }
    return actual == expected;
}

#define SPINDLE_EXPECT(cond) spindle__t_expect((cond), #cond, __FILE__, __LINE__)
#define SPINDLE_EXPECT_STR(actual, expected) spindle__t_expect_str((actual), (expected), #actual, __FILE__, __LINE__)
#define SPINDLE_EXPECT_INT(actual, expected) \
    spindle__t_expect_int((long long)(actual), (long long)(expected), #actual, __FILE__, __LINE__)

/* Runs one test case with fresh settings and reports it. */
#define SPINDLE_TEST(fn) spindle__t_case(#fn, fn)

static inline void spindle__t_case(const char *name, void (*fn)(void)) {
    spindle_test_reset();
    spindle__t_case_failed = false;
    fn();
    if (spindle__t_case_failed) {
        spindle__t_failed++;
        printf("FAILED %s\n", name);
    } else {
        spindle__t_passed++;
        printf("ok %s\n", name);
    }
    fflush(stdout);
}

/* Prints the closing line and returns main's exit code. */
static inline int spindle_test_finish(void) {
    spindle_test_reset();
    printf("%d passed, %d failed\n", spindle__t_passed, spindle__t_failed);
    return spindle__t_failed ? 1 : 0;
}

#endif /* SPINDLE_TESTING_H */
