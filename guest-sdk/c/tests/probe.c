/* A kind that exercises the SDK for its own tests: each step does what the job's input
 * asks of it, and skips when asked nothing. */
#include "spindle.h"

/* Works in slices: one `more` per slice, the position in a JSON cursor. */
static spindle_outcome slices(spindle_step *step) {
    int64_t total = spindle_int_or(spindle_get(spindle_input(step), "slices"), 0);
    int64_t done = spindle_int_or(spindle_get(spindle_cursor_value(step), "done"), 0);
    if (spindle_failed(step)) return spindle_failure(step);
    if (total == 0) return spindle_skip("no slices asked for");
    spindle_heartbeat_progress(step, spindle_cursor(step) ? spindle_cursor(step) : "", (uint64_t)done, total);
    if (done < total) {
        cJSON *cursor = cJSON_CreateObject();
        cJSON_AddNumberToObject(cursor, "done", (double)(done + 1));
        return spindle_more_json(cursor, (uint64_t)(done + 1), total);
    }
    cJSON *out = cJSON_CreateObject();
    cJSON_AddNumberToObject(out, "slices", (double)done);
    return spindle_complete(out);
}

/* Fans out one child per kind listed, then completes with what it saw. */
static spindle_outcome fan(spindle_step *step) {
    spindle_value plan = spindle_get(spindle_input(step), "fan");
    if (!spindle_present(plan)) return spindle_skip("no fan-out asked for");
    size_t seen;
    const spindle_child_result *children = spindle_children(step, &seen);
    if (children) {
        cJSON *out = cJSON_CreateArray();
        for (size_t i = 0; i < seen; i++) {
            static const char *const states[] = {"succeeded", "failed", "cancelled"};
            cJSON *child = cJSON_CreateObject();
            cJSON_AddStringToObject(child, "id", children[i].job_id);
            cJSON_AddStringToObject(child, "kind", children[i].kind);
            if (children[i].state == SPINDLE_CHILD_OPEN)
                cJSON_AddNullToObject(child, "state");
            else
                cJSON_AddStringToObject(child, "state", states[children[i].state]);
            const cJSON *output = spindle_json(spindle_child_output(step, &children[i]));
            cJSON_AddItemToObject(child, "output", output ? cJSON_Duplicate(output, true) : cJSON_CreateNull());
            if (children[i].failure_code) cJSON_AddStringToObject(child, "failure", children[i].failure_code);
            cJSON_AddItemToArray(out, child);
        }
        cJSON *wrapped = cJSON_CreateObject();
        cJSON_AddItemToObject(wrapped, "children", out);
        cJSON_AddStringToObject(wrapped, "cursor", spindle_cursor(step) ? spindle_cursor(step) : "");
        return spindle_complete(wrapped);
    }
    spindle_value kinds = spindle_array(spindle_get(plan, "kinds"));
    spindle_value join = spindle_get(plan, "join");
    spindle_fan_out fan_out = !spindle_present(join)       ? spindle_fan_out_all()
                              : cJSON_IsNumber(join.node) ? spindle_fan_out_count((uint32_t)spindle_int(join))
                                                          : spindle_fan_out_any();
    if (spindle_bool_or(spindle_get(plan, "keep"), false)) spindle_fan_out_keep_leftovers(&fan_out);
    bool keyed = spindle_bool_or(spindle_get(plan, "keyed"), false);
    for (size_t i = 0; i < spindle_len(kinds); i++) {
        cJSON *input = cJSON_CreateObject();
        cJSON_AddNumberToObject(input, "index", (double)i);
        spindle_child *child = spindle_fan_out_add(&fan_out, spindle_string(spindle_at(kinds, i)), input);
        if (keyed) spindle_child_idempotency_key(child, "%s/%zu", spindle_idempotency_key(step), i);
        spindle_child_priority(child, SPINDLE_PRIORITY_BACKGROUND);
        spindle_child_lease_key(child, "gpu");
    }
    if (spindle_bool_or(spindle_get(plan, "bad_child"), false)) spindle_fan_out_add(&fan_out, "broken", NULL);
    if (spindle_failed(step)) { /* nothing to create after all */
        spindle_fan_out_free(&fan_out);
        return spindle_failure(step);
    }
    return spindle_with_cursor(spindle_await_children(&fan_out), "fanned");
}

/* Waits for the named signal, then completes with its body or the timeout. */
static spindle_outcome wait(spindle_step *step) {
    const char *name = spindle_string_or(spindle_get(spindle_input(step), "wait"), NULL);
    if (spindle_failed(step)) return spindle_failure(step);
    if (!name) return spindle_skip("no signal to wait for");
    cJSON *out = cJSON_CreateObject();
    switch (spindle_awaited_kind(step)) {
    case SPINDLE_AWAITED_SIGNAL: {
        const cJSON *body = spindle_json(spindle_signal(step));
        if (spindle_failed(step)) {
            cJSON_Delete(out);
            return spindle_failure(step);
        }
        cJSON_AddItemToObject(out, "signal", cJSON_Duplicate(body, true));
        break;
    }
    case SPINDLE_AWAITED_SIGNAL_TIMEOUT: cJSON_AddBoolToObject(out, "timed_out", true); break;
    default:
        cJSON_Delete(out);
        return spindle_with_cursor_json(spindle_await_signal(name, 60), cJSON_CreateString("waiting"));
    }
    cJSON_AddStringToObject(out, "cursor", spindle_cursor(step) ? spindle_cursor(step) : "");
    return spindle_complete(out);
}

/* Reads the deployment's settings and the tenant's secrets. */
static spindle_outcome config(spindle_step *step) {
    if (!spindle_bool_or(spindle_get(spindle_input(step), "config"), false)) return spindle_skip("no config read");
    const char *region = spindle_config_get("region");
    const char *placeholder = spindle_config_secret("key");
    static const char message[] = "what do ya want for nothing?";
    uint8_t mac[32];
    char hex[65] = "";
    if (spindle_config_hmac_sha256("key", message, sizeof message - 1, mac))
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddItemToObject(out, "region", region ? cJSON_CreateString(region) : cJSON_CreateNull());
    cJSON_AddItemToObject(out, "placeholder", placeholder ? cJSON_CreateString(placeholder) : cJSON_CreateNull());
    cJSON_AddItemToObject(out, "missing", spindle_config_get("missing") ? cJSON_CreateTrue() : cJSON_CreateFalse());
    cJSON_AddStringToObject(out, "mac", hex);
    return spindle_complete(out);
}

/* The last step: how it ends is what the input's `final` says. */
static spindle_outcome final(spindle_step *step) {
    spindle_value input = spindle_input(step);
    const char *mode = spindle_string_or(spindle_get(input, "final"), "complete");
    if (spindle_failed(step)) return spindle_failure(step);
    if (strcmp(mode, "refuse") == 0)
        return spindle_with_detail(spindle_refused("final-refused", "refused as asked"), "detail for the log only");
    if (strcmp(mode, "retry") == 0) return spindle_retryable("final-retry", "attempt %u fails", spindle_attempt(step));
    if (strcmp(mode, "stop") == 0) {
        if (!spindle_keep_alive(step)) return spindle_failure(step);
        return spindle_complete(cJSON_CreateString("kept alive"));
    }
    if (strcmp(mode, "prior") == 0) {
        size_t len;
        const uint8_t *raw = spindle_prior_bytes(step, "slices", &len);
        int64_t slices = spindle_int(spindle_get(spindle_prior(step, "slices"), "slices"));
        cJSON *out = cJSON_CreateObject();
        cJSON_AddBoolToObject(out, "in_input", raw != NULL);
        cJSON_AddNumberToObject(out, "slices", (double)slices);
        return spindle_complete(out);
    }
    if (strcmp(mode, "missing-prior") == 0) {
        spindle_prior(step, "never");
        return spindle_complete(cJSON_CreateString("not reached: the recorded failure wins"));
    }
    if (strcmp(mode, "nested") == 0) {
        int64_t n = spindle_int(spindle_at(spindle_get(input, "items"), 1));
        return spindle_complete(cJSON_CreateNumber((double)n));
    }
    if (strcmp(mode, "bytes") == 0) return spindle_complete_bytes("\x01raw", 4);
    if (strcmp(mode, "null-output") == 0) return spindle_complete(NULL);
    return spindle_complete(cJSON_CreateString(mode));
}

static bool compensate(spindle_summary *job) {
    spindle_log_info("compensating %s for %s", spindle_summary_job_id(job), spindle_summary_failure_code(job));
    if (spindle_bool_or(spindle_get(spindle_summary_input(job), "hook_fails"), false))
        return spindle_hook_fail(job, "compensation-failed", "could not compensate");
    return true;
}

static bool notify(spindle_summary *job) {
    const char *final_output = spindle_string_or(spindle_summary_output(job, "final"), "?");
    spindle_log_info("notified: %s", final_output);
    return true;
}

static const spindle_kind probe = {
    .name = "probe",
    .steps = (const spindle_step_def[]){
        {"slices", 2, slices, NULL},
        {"fan", 1, fan, NULL},
        {"wait", 1, wait, NULL},
        {"config", 1, config, NULL},
        {"final", 1, final, "{\"type\":[\"string\",\"object\",\"number\"]}"},
        {NULL, 0, NULL, NULL},
    },
    .retry = {2, 10, 20},
    .flags = 0,
    .input_schema = "{\"type\":\"object\"}",
    .on_failure = compensate,
    .on_success = notify,
};

SPINDLE_EXPORT_KIND(probe);
