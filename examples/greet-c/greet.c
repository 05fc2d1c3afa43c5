/* The greet kind in C: compose a greeting, then deliver it once per job.
 *
 * Its behaviour is the same in every guest language (see the polyglot spec): its input
 * schema has the host refuse a submission without a non-empty string `name`; `compose`
 * refuses such input itself too (the local runner does not check schemas) and, asked to
 * `explode`, fails the way a C program naturally does, with abort(); `deliver` fails its
 * first attempt when asked to be `flaky`.
 */
#include <stdio.h>
#include <stdlib.h>

#include "spindle.h"

static spindle_outcome compose(spindle_step *step) {
    spindle_value input = spindle_object(spindle_input(step));
    spindle_value name = spindle_get(input, "name");
    const char *who = spindle_string(name);
    bool explode = spindle_bool_or(spindle_get(input, "explode"), false);
    if (!spindle_failed(step) && who[0] == '\0') spindle_misfit(name, "must not be empty");
    if (spindle_failed(step)) return spindle_failure(step); /* refused `invalid-input` */
    if (explode) {
        /* C has no exception to escape: the step traps. The host records a
         * `sandbox.panic` fault, retries it while the budget lasts, and keeps this line
         * in the attempt's `guest_stderr`. */
        fprintf(stderr, "greet-c: asked to explode while composing a greeting for %s\n", who);
        abort();
    }
    spindle_log_info("composing a greeting for %s", who);
    cJSON *composed = cJSON_CreateObject();
    cJSON_AddStringToObject(composed, "text", spindle_format("Hello, %s!", who));
    return spindle_complete(composed);
}

static spindle_outcome deliver(spindle_step *step) {
    const char *text = spindle_string(spindle_get(spindle_object(spindle_prior(step, "compose")), "text"));
    bool flaky = spindle_bool_or(spindle_get(spindle_input(step), "flaky"), false);
    if (spindle_failed(step)) return spindle_failure(step);
    spindle_heartbeat(step);
    if (flaky && spindle_attempt(step) == 1)
        return spindle_retryable("upstream-unavailable", "the first attempt fails on purpose");
    /* Steps run at least once: a real mailer would drop duplicates by this key. */
    spindle_log_info("delivered %s (key %s)", text, spindle_idempotency_key(step));
    cJSON *delivered = cJSON_CreateObject();
    cJSON_AddStringToObject(delivered, "delivered", text);
    cJSON_AddNumberToObject(delivered, "attempt", spindle_attempt(step));
    return spindle_complete(delivered);
}

/* The JSON Schema (draft 2020-12) a job's input must follow: the host refuses a
 * submission that breaks it (422 `invalid-input`) before anything is queued. */
static const char input_schema[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
    "\"title\":\"GreetInput\","
    "\"description\":\"Who to greet, and the failures to demonstrate.\","
    "\"type\":\"object\","
    "\"required\":[\"name\"],"
    "\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"who to greet\"},"
    "\"flaky\":{\"type\":\"boolean\",\"default\":false,\"description\":\"fail deliver's first attempt\"},"
    "\"explode\":{\"type\":\"boolean\",\"default\":false,\"description\":\"fail compose with abort()\"}}}";

/* compose's output, read back by deliver. */
static const char composed_schema[] =
    "{\"type\":\"object\",\"required\":[\"text\"],\"properties\":{\"text\":{\"type\":\"string\"}}}";

static const spindle_kind greet = {
    .name = "greet-c",
    .steps = (const spindle_step_def[]){
        {"compose", 1, compose, composed_schema},
        {"deliver", 1, deliver, NULL},
        {0},
    },
    .retry = {3, 100, 1000},
    .input_schema = input_schema,
};

SPINDLE_EXPORT_KIND(greet);
