/* A kind that exercises spindle_http_send for the SDK's own tests: `send` makes the
 * request the job's input describes and reports what came back; `raw` misuses the raw
 * bindings so the tests can see the local runner catch it. Each skips when not asked. */
#include "spindle.h"

/* Sends the request in `input.send`:
 *   {"method": "POST", "url": "...", "headers": [["name", "value" or null], ...],
 *    "bearer_secret": "api-token", "body": "text" or "body_size": n, "max": n,
 *    "lookup": "Content-Type", "fail": true}
 * and completes with {"error", "detail", "status", "looked_up", "header_count", "body",
 * "body_len"} — or, with `fail`, returns the failure an error or an error status means. */
static spindle_outcome send(spindle_step *step) {
    spindle_value asked = spindle_get(spindle_input(step), "send");
    if (!spindle_present(asked)) return spindle_skip("no request asked for");
    spindle_value headers = spindle_get(asked, "headers"); /* an array, or absent */
    spindle_http_header list[9];
    size_t count = spindle_len(headers);
    if (count > 8) {
        spindle_misfit(headers, "at most 8 headers");
        count = 0;
    }
    for (size_t i = 0; i < count; i++) {
        spindle_value pair = spindle_at(headers, i);
        list[i].name = spindle_string(spindle_at(pair, 0));
        list[i].value = spindle_string_or(spindle_at(pair, 1), NULL);
    }
    const char *secret = spindle_string_or(spindle_get(asked, "bearer_secret"), NULL);
    if (secret) {
        const char *placeholder = spindle_config_secret(secret);
        list[count].name = "authorization";
        list[count++].value = placeholder ? spindle_format("Bearer %s", placeholder) : NULL;
    }
    const char *body = spindle_string_or(spindle_get(asked, "body"), "");
    size_t body_len = strlen(body);
    int64_t size = spindle_int_or(spindle_get(asked, "body_size"), 0);
    spindle_http_request request = {
        .method = spindle_string_or(spindle_get(asked, "method"), NULL),
        .url = spindle_string(spindle_get(asked, "url")),
        .headers = list,
        .header_count = count,
        .body = body_len ? body : NULL,
        .body_len = body_len,
        .max_response_bytes = (size_t)spindle_int_or(spindle_get(asked, "max"), 0),
    };
    const char *lookup = spindle_string_or(spindle_get(asked, "lookup"), "content-type");
    bool fail = spindle_bool_or(spindle_get(asked, "fail"), false);
    if (spindle_failed(step)) return spindle_failure(step);

    char *made = NULL; /* a body of `body_size` bytes, a to z over and over */
    if (size > 0) {
        made = (char *)malloc((size_t)size);
        if (!made) return spindle_retryable("out-of-memory", "no room for the body");
        for (int64_t i = 0; i < size; i++) made[i] = (char)('a' + i % 26);
        request.body = made;
        request.body_len = (size_t)size;
    }
    spindle_http_response response;
    spindle_http_error err = spindle_http_send(&request, &response);
    free(made);
    if (fail && err) return spindle_http_failure(err, &response);
    if (fail && response.status >= 400) {
        spindle_outcome failure = spindle_http_status_failure(&response);
        spindle_http_response_free(&response);
        return failure;
    }
    const char *looked_up = spindle_http_response_header(&response, lookup);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "error", spindle_http_error_name(err));
    cJSON_AddStringToObject(out, "detail", response.error_detail);
    cJSON_AddNumberToObject(out, "status", response.status);
    cJSON_AddItemToObject(out, "looked_up", looked_up ? cJSON_CreateString(looked_up) : cJSON_CreateNull());
    cJSON_AddNumberToObject(out, "header_count", (double)response.header_count);
    cJSON_AddItemToObject(out, "body", response.body ? cJSON_CreateString(response.body) : cJSON_CreateNull());
    cJSON_AddNumberToObject(out, "body_len", (double)response.body_len);
    spindle_http_response_free(&response);
    spindle_http_response_free(&response); /* a second free is harmless */
    return spindle_complete(out);
}

/* Misuses the raw bindings as `input.raw` says: "leak" leaves fields undropped,
 * "parent-first" finishes a body while its stream lives. */
static spindle_outcome raw(spindle_step *step) {
    const char *mode = spindle_string_or(spindle_get(spindle_input(step), "raw"), NULL);
    if (spindle_failed(step)) return spindle_failure(step);
    if (!mode) return spindle_skip("no misuse asked for");
    if (strcmp(mode, "leak") == 0) {
        wasi_http_types_constructor_fields();
    } else if (strcmp(mode, "parent-first") == 0) {
        wasi_http_types_own_outgoing_request_t request =
            wasi_http_types_constructor_outgoing_request(wasi_http_types_constructor_fields());
        wasi_http_types_own_outgoing_body_t body;
        wasi_http_types_own_output_stream_t stream;
        wasi_http_types_error_code_t code;
        wasi_http_types_method_outgoing_request_body(wasi_http_types_borrow_outgoing_request(request), &body);
        wasi_http_types_method_outgoing_body_write(wasi_http_types_borrow_outgoing_body(body), &stream);
        wasi_http_types_static_outgoing_body_finish(body, NULL, &code);
    }
    return spindle_complete(cJSON_CreateString(mode));
}

static const spindle_kind http_probe = {
    .name = "http-probe",
    .steps = (const spindle_step_def[]){
        {"send", 1, send, NULL},
        {"raw", 1, raw, NULL},
        {NULL, 0, NULL, NULL},
    },
    .retry = {2, 10, 20},
};

SPINDLE_EXPORT_KIND(http_probe);
