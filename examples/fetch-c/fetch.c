/* The fetch kind in C: one step, `call`, that posts a message upstream with the tenant's
 * API token, then tries a destination the host's policy denies.
 *
 * Its behaviour is the same in every guest language (one integration test checks them
 * all): POST `{"message": <message>}` to `url` with `content-type: application/json`
 * and, when the tenant set the secret `api-token`, `authorization: Bearer <placeholder>`
 * (the host puts the value in place); a status other than 2xx is retryable. Then the same
 * body to `denied_url`, which the deployment does not allow: the typed denial is the
 * expected answer and goes in the output, as `denied` and the error's name.
 */
#include <stdlib.h>
#include <string.h>

#include "spindle.h"

/* `{"message": <message>}`, malloc'd by cJSON; NULL if it ran out of memory. */
static char *message_body(const char *message) {
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "message", message);
    char *text = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    return text;
}

static spindle_outcome call(spindle_step *step) {
    spindle_value input = spindle_object(spindle_input(step));
    const char *url = spindle_string(spindle_get(input, "url"));
    const char *denied_url = spindle_string(spindle_get(input, "denied_url"));
    const char *message = spindle_string(spindle_get(input, "message"));
    if (spindle_failed(step)) return spindle_failure(step); /* refused `invalid-input` */

    char *body = message_body(message);
    if (!body) return spindle_retryable("out-of-memory", "the request body could not be built");
    /* A placeholder, never the token: the host swaps the value in once the policy
     * allowed the request. No secret, no header (a NULL value is left out). */
    const char *token = spindle_config_secret("api-token");
    const spindle_http_header headers[] = {
        {"content-type", "application/json"},
        {"authorization", token ? spindle_format("Bearer %s", token) : NULL},
    };
    spindle_http_request request = {
        .method = "POST",
        .url = url,
        .headers = headers,
        .header_count = sizeof headers / sizeof *headers,
        .body = body,
        .body_len = strlen(body),
    };

    spindle_http_response answer;
    spindle_http_error err = spindle_http_send(&request, &answer);
    if (err) {
        free(body);
        return spindle_http_failure(err, &answer); /* refused if denied or malformed, else retryable */
    }
    if (answer.status < 200 || answer.status > 299) {
        unsigned status = answer.status;
        spindle_http_response_free(&answer);
        free(body);
        return spindle_retryable(spindle_format("upstream-%u", status), "the upstream service answered %u", status);
    }

    /* The second destination is not in the deployment's allow list: the host denies it
     * before anything leaves, and the step carries on. */
    request.url = denied_url;
    spindle_http_response second;
    spindle_http_error denial = spindle_http_send(&request, &second);
    free(body);
    if (denial && denial != SPINDLE_HTTP_DENIED) { /* any other failure is a failure */
        spindle_http_response_free(&answer);
        return spindle_http_failure(denial, &second);
    }
    spindle_http_response_free(&second);
    spindle_log_info("posted to the upstream (%u); the second request was %s", answer.status,
                     denial ? "denied" : "allowed");

    cJSON *out = cJSON_CreateObject();
    cJSON_AddNumberToObject(out, "status", answer.status);
    cJSON_AddStringToObject(out, "body", answer.body);
    cJSON_AddBoolToObject(out, "denied", denial == SPINDLE_HTTP_DENIED);
    cJSON_AddStringToObject(out, "denied_error", denial ? spindle_http_error_name(denial) : "");
    spindle_http_response_free(&answer);
    return spindle_complete(out);
}

/* The JSON Schema (draft 2020-12) a job's input must follow. */
static const char input_schema[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
    "\"title\":\"FetchInput\","
    "\"description\":\"Where to post the message, and a destination the policy denies.\","
    "\"type\":\"object\","
    "\"required\":[\"url\",\"denied_url\",\"message\"],"
    "\"properties\":{"
    "\"url\":{\"type\":\"string\",\"minLength\":1,\"description\":\"an allowed destination\"},"
    "\"denied_url\":{\"type\":\"string\",\"minLength\":1,\"description\":\"a destination the policy denies\"},"
    "\"message\":{\"type\":\"string\",\"description\":\"what to post\"}}}";

/* call's output. */
static const char call_schema[] =
    "{\"type\":\"object\",\"required\":[\"status\",\"body\",\"denied\",\"denied_error\"],"
    "\"properties\":{\"status\":{\"type\":\"integer\"},\"body\":{\"type\":\"string\"},"
    "\"denied\":{\"type\":\"boolean\"},\"denied_error\":{\"type\":\"string\"}}}";

static const spindle_kind fetch = {
    .name = "fetch-c",
    .steps = (const spindle_step_def[]){
        {"call", 1, call, call_schema},
        {0},
    },
    .retry = {3, 100, 1000},
    .input_schema = input_schema,
};

SPINDLE_EXPORT_KIND(fetch);
