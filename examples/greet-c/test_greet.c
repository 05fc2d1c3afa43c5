/* The greet kind's local test: whole jobs through the SDK's native runner, no host, no wasm. */
#include "spindle_testing.h"

static void greets_ada(void) {
    spindle_test_run *run = spindle_run_job("{\"name\":\"Ada\"}");
    SPINDLE_EXPECT_STR(run->state, "succeeded");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "compose"), "{\"text\":\"Hello, Ada!\"}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "deliver"), "{\"delivered\":\"Hello, Ada!\",\"attempt\":1}");
    SPINDLE_EXPECT_INT(run->call_count, 2);
    SPINDLE_EXPECT_INT(run->calls[1].heartbeats, 1);
    if (SPINDLE_EXPECT_INT(run->log_count, 2)) {
        SPINDLE_EXPECT_STR(run->logs[0].message, "composing a greeting for Ada");
        SPINDLE_EXPECT_STR(run->logs[1].message, "delivered Hello, Ada! (key " SPINDLE_TEST_JOB_ID "/deliver)");
        SPINDLE_EXPECT_INT(run->logs[1].level, SPINDLE_LOG_INFO);
    }
    SPINDLE_EXPECT(run->hook == NULL);
    spindle_test_run_free(run);
}

static void refuses_input_without_a_name(void) {
    static const char *const payloads[] = {"{}", "{\"name\":\"\"}", "{\"name\":7}", "[]", "not json", "{\"name\":null}"};
    for (size_t i = 0; i < sizeof payloads / sizeof *payloads; i++) {
        spindle_test_run *run = spindle_run_job(payloads[i]);
        SPINDLE_EXPECT_STR(run->state, "failed");
        SPINDLE_EXPECT_STR(run->failure_step, "compose");
        SPINDLE_EXPECT_STR(run->failure_code, "invalid-input");
        SPINDLE_EXPECT_INT(run->call_count, 1); /* a refusal is not retried */
        spindle_test_run_free(run);
    }
}

static void says_what_does_not_fit_without_quoting_the_input(void) {
    spindle_test_run *run = spindle_run_job("{}");
    SPINDLE_EXPECT_STR(run->failure_message, "the job's input does not fit at `name`: missing");
    spindle_test_run_free(run);
    run = spindle_run_job("{\"name\":4111111111111111}");
    SPINDLE_EXPECT_STR(run->failure_message, "the job's input does not fit at `name`: expected a string");
    spindle_test_run_free(run);
    run = spindle_run_job("{\"name\":\"\"}");
    SPINDLE_EXPECT_STR(run->failure_message, "the job's input does not fit at `name`: must not be empty");
    spindle_test_run_free(run);
    run = spindle_run_job("[]");
    SPINDLE_EXPECT_STR(run->failure_message, "the job's input does not fit: expected an object");
    spindle_test_run_free(run);
    run = spindle_run_job("{\"name\":");
    SPINDLE_EXPECT_STR(run->failure_message, "the job's input is not valid JSON");
    /* The SDK logs why, as the other SDKs do. */
    SPINDLE_EXPECT(run->log_count == 1 && strstr(run->logs[0].message, "step `compose` refused invalid-input"));
    spindle_test_run_free(run);
}

static void a_flaky_delivery_succeeds_on_the_second_attempt(void) {
    spindle_test_run *run = spindle_run_job("{\"name\":\"Ada\",\"flaky\":true}");
    SPINDLE_EXPECT_STR(run->state, "succeeded");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "deliver"), "{\"delivered\":\"Hello, Ada!\",\"attempt\":2}");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "deliver"), 2);
    const spindle_test_call *first = spindle_test_call_of(run, "deliver", 0);
    const spindle_test_call *second = spindle_test_call_of(run, "deliver", 1);
    if (SPINDLE_EXPECT(first && second)) {
        SPINDLE_EXPECT_STR(first->outcome, "retryable");
        SPINDLE_EXPECT_STR(first->code, "upstream-unavailable");
        SPINDLE_EXPECT_STR(first->message, "the first attempt fails on purpose");
        SPINDLE_EXPECT_INT(first->attempt, 1);
        SPINDLE_EXPECT_INT(second->attempt, 2);
        SPINDLE_EXPECT_STR(second->outcome, "complete");
    }
    spindle_test_run_free(run);
}

static void an_explosion_aborts_each_attempt_to_the_end(void) {
    spindle_test_run *run = spindle_run_job("{\"name\":\"Ada\",\"explode\":true}");
    SPINDLE_EXPECT_STR(run->state, "failed");
    SPINDLE_EXPECT_STR(run->failure_step, "compose");
    SPINDLE_EXPECT_STR(run->failure_code, "sandbox.panic");
    SPINDLE_EXPECT_INT(run->call_count, 3); /* a trap is retried like the host's faults */
    SPINDLE_EXPECT_INT(run->calls[2].attempt, 3);
    SPINDLE_EXPECT(strstr(run->calls[0].stderr_text, "asked to explode while composing a greeting for Ada") != NULL);
    spindle_test_run_free(run);
}

/* The schema text `key` of `object`, taken out of it and parsed (NULL if absent). */
static cJSON *take_schema(cJSON *object, const char *key) {
    cJSON *text = cJSON_DetachItemFromObject(object, key);
    cJSON *schema = cJSON_IsString(text) ? cJSON_Parse(text->valuestring) : NULL;
    cJSON_Delete(text);
    return schema;
}

static void declares_its_input_and_output_schemas(void) {
    spindle_test_run *run = spindle_run_job("{\"name\":\"Ada\"}");
    cJSON *input = take_schema(run->spec, "input_schema");
    if (SPINDLE_EXPECT(input != NULL)) {
        char *required = cJSON_PrintUnformatted(cJSON_GetObjectItem(input, "required"));
        SPINDLE_EXPECT_STR(required, "[\"name\"]");
        free(required);
        SPINDLE_EXPECT_STR(cJSON_GetStringValue(cJSON_GetObjectItem(input, "$schema")),
                           "https://json-schema.org/draft/2020-12/schema");
        SPINDLE_EXPECT_STR(cJSON_GetStringValue(cJSON_GetObjectItem(input, "type")), "object");
        cJSON *properties = cJSON_GetObjectItem(input, "properties");
        cJSON *name = cJSON_GetObjectItem(properties, "name");
        SPINDLE_EXPECT_STR(cJSON_GetStringValue(cJSON_GetObjectItem(name, "type")), "string");
        cJSON *min_length = cJSON_GetObjectItem(name, "minLength");
        SPINDLE_EXPECT(cJSON_IsNumber(min_length) && min_length->valuedouble == 1);
        cJSON *flaky = cJSON_GetObjectItem(properties, "flaky");
        cJSON *explode = cJSON_GetObjectItem(properties, "explode");
        SPINDLE_EXPECT_STR(cJSON_GetStringValue(cJSON_GetObjectItem(flaky, "type")), "boolean");
        SPINDLE_EXPECT_STR(cJSON_GetStringValue(cJSON_GetObjectItem(explode, "type")), "boolean");
        SPINDLE_EXPECT(cJSON_GetObjectItem(input, "additionalProperties") == NULL); /* other keys are allowed */
    }
    cJSON *composed = take_schema(cJSON_GetArrayItem(cJSON_GetObjectItem(run->spec, "steps"), 0), "output_schema");
    if (SPINDLE_EXPECT(composed != NULL)) {
        char *required = cJSON_PrintUnformatted(cJSON_GetObjectItem(composed, "required"));
        SPINDLE_EXPECT_STR(required, "[\"text\"]");
        free(required);
    }
    cJSON_Delete(input);
    cJSON_Delete(composed);
    spindle_test_run_free(run);
}

static void describes_itself_as_the_spec_says(void) {
    spindle_test_run *run = spindle_run_job("{\"name\":\"Ada\"}");
    /* The schemas are checked above; here, the rest of the spec. */
    cJSON_Delete(take_schema(run->spec, "input_schema"));
    cJSON_Delete(take_schema(cJSON_GetArrayItem(cJSON_GetObjectItem(run->spec, "steps"), 0), "output_schema"));
    char *spec = cJSON_PrintUnformatted(run->spec);
    SPINDLE_EXPECT_STR(spec, "{\"name\":\"greet-c\",\"steps\":[{\"key\":\"compose\",\"weight\":1},"
                             "{\"key\":\"deliver\",\"weight\":1}],\"cancellable\":false,\"max_attempts\":3,"
                             "\"initial_backoff_ms\":100,\"max_backoff_ms\":1000,\"has_failure_effect\":false,"
                             "\"notifies_on_success\":false}");
    free(spec);
    spindle_test_run_free(run);
}

int main(void) {
    SPINDLE_TEST(greets_ada);
    SPINDLE_TEST(refuses_input_without_a_name);
    SPINDLE_TEST(says_what_does_not_fit_without_quoting_the_input);
    SPINDLE_TEST(a_flaky_delivery_succeeds_on_the_second_attempt);
    SPINDLE_TEST(an_explosion_aborts_each_attempt_to_the_end);
    SPINDLE_TEST(declares_its_input_and_output_schemas);
    SPINDLE_TEST(describes_itself_as_the_spec_says);
    return spindle_test_finish();
}
