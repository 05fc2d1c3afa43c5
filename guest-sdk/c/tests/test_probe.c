/* The C SDK's own tests: the probe kind's jobs through the native runner, and the
 * outcome constructors on their own. run.sh runs them with SPINDLE_TEST_LEAKS set, so a
 * call the SDK leaves memory behind in fails as `test.leak`. */
#include "spindle_testing.h"

static void describes_every_field(void) {
    spindle_test_run *run = spindle_run_job("{}");
    char *spec = cJSON_PrintUnformatted(run->spec);
    SPINDLE_EXPECT_STR(spec, "{\"name\":\"probe\",\"steps\":[{\"key\":\"slices\",\"weight\":2},{\"key\":\"fan\",\"weight\":1},"
                             "{\"key\":\"wait\",\"weight\":1},{\"key\":\"config\",\"weight\":1},{\"key\":\"final\","
                             "\"weight\":1,\"output_schema\":\"{\\\"type\\\":[\\\"string\\\",\\\"object\\\",\\\"number\\\"]}\"}],"
                             "\"cancellable\":false,\"max_attempts\":2,\"initial_backoff_ms\":10,\"max_backoff_ms\":20,"
                             "\"has_failure_effect\":true,\"notifies_on_success\":true,\"input_schema\":\"{\\\"type\\\":\\\"object\\\"}\"}");
    free(spec);
    SPINDLE_EXPECT_STR(run->state, "succeeded");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "final"), "\"complete\"");
    SPINDLE_EXPECT_STR(spindle_test_call_of(run, "slices", 0)->reason, "no slices asked for");
    SPINDLE_EXPECT_STR(run->hook, "on-success");
    SPINDLE_EXPECT(run->hook_ok);
    SPINDLE_EXPECT_STR(run->logs[run->log_count - 1].message, "notified: complete");
    SPINDLE_EXPECT_STR(run->logs[run->log_count - 1].step, "on-success");
    spindle_test_run_free(run);
}

static void more_calls_again_with_the_cursor(void) {
    spindle_test_run *run = spindle_run_job("{\"slices\":3}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "slices"), "{\"slices\":3}");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "slices"), 4);
    const spindle_test_call *second = spindle_test_call_of(run, "slices", 1);
    SPINDLE_EXPECT_STR(second->cursor, "{\"done\":1}");
    SPINDLE_EXPECT_STR(second->outcome, "more");
    SPINDLE_EXPECT_STR(second->next_cursor, "{\"done\":2}");
    SPINDLE_EXPECT_INT(second->done, 2);
    SPINDLE_EXPECT_INT(second->total, 3);
    SPINDLE_EXPECT_INT(second->attempt, 1);
    SPINDLE_EXPECT_INT(second->heartbeats, 1);
    spindle_test_run_free(run);
}

static void children_echo_their_input_by_default(void) {
    spindle_test_run *run = spindle_run_job("{\"fan\":{\"kinds\":[\"a\",\"b\"]}}");
    SPINDLE_EXPECT_STR(run->state, "succeeded");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "fan"),
                       "{\"children\":[{\"id\":\"00000000-0000-7000-8001-000000000001\",\"kind\":\"a\",\"state\":\"succeeded\","
                       "\"output\":{\"index\":0}},{\"id\":\"00000000-0000-7000-8001-000000000002\",\"kind\":\"b\","
                       "\"state\":\"succeeded\",\"output\":{\"index\":1}}],\"cursor\":\"fanned\"}");
    const spindle_test_call *first = spindle_test_call_of(run, "fan", 0);
    const cJSON *child = cJSON_GetArrayItem(cJSON_GetObjectItem(first->json, "children"), 0);
    SPINDLE_EXPECT_STR(cJSON_GetStringValue(cJSON_GetObjectItem(child, "priority")), "background");
    SPINDLE_EXPECT_STR(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItem(child, "lease_keys"), 0)), "gpu");
    SPINDLE_EXPECT_INT(run->child_count, 2);
    SPINDLE_EXPECT_INT(spindle_test_call_of(run, "fan", 1)->awaited, SPINDLE_AWAITED_CHILDREN);
    spindle_test_run_free(run);
}

static spindle_test_child_outcome fail_b(const char *kind, const char *input, void *data) {
    (void)input, (void)data;
    return strcmp(kind, "b") == 0 ? spindle_test_child_failed("bad-image", "no image")
                                  : spindle_test_child_succeeded("{\"bytes\":12}");
}

static void a_handler_settles_children_and_any_leaves_the_rest_open(void) {
    spindle_test_set_child_handler(fail_b, NULL);
    spindle_test_run *run = spindle_run_job("{\"fan\":{\"kinds\":[\"b\",\"a\",\"a\"],\"join\":\"any\",\"keyed\":true}}");
    const char *out = spindle_test_output(run, "fan");
    SPINDLE_EXPECT(out && strstr(out, "\"state\":\"failed\",\"output\":null,\"failure\":\"bad-image\""));
    SPINDLE_EXPECT(out && strstr(out, "\"kind\":\"a\",\"state\":null"));
    SPINDLE_EXPECT_STR(run->children[0].idempotency_key, SPINDLE_TEST_JOB_ID "/fan/0");
    SPINDLE_EXPECT_INT(run->children[1].state, SPINDLE_CHILD_OPEN);
    spindle_test_run_free(run);
}

static void a_child_without_input_is_refused(void) {
    spindle_test_run *run = spindle_run_job("{\"fan\":{\"kinds\":[\"a\"],\"bad_child\":true}}");
    SPINDLE_EXPECT_STR(run->failure_code, "invalid-child-input");
    SPINDLE_EXPECT(strstr(run->logs[0].message, "child 1 of kind `broken`: no JSON input") != NULL);
    spindle_test_run_free(run);
}

static void a_signal_is_delivered_else_the_wait_times_out(void) {
    spindle_test_send_signal("shipped", "{\"carrier\":\"post\"}");
    spindle_test_send_signal("other", "1");
    spindle_test_run *run = spindle_run_job("{\"wait\":\"shipped\"}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "wait"), "{\"signal\":{\"carrier\":\"post\"},\"cursor\":\"\\\"waiting\\\"\"}");
    SPINDLE_EXPECT_INT(run->signal_wait_count, 1);
    SPINDLE_EXPECT_STR(run->signal_waits[0].body, "{\"carrier\":\"post\"}");
    SPINDLE_EXPECT_INT(run->signal_waits[0].timeout_secs, 60);
    spindle_test_run_free(run);
    run = spindle_run_job("{\"wait\":\"shipped\"}"); /* the queue was the first run's */
    SPINDLE_EXPECT_STR(spindle_test_output(run, "wait"), "{\"timed_out\":true,\"cursor\":\"\\\"waiting\\\"\"}");
    spindle_test_run_free(run);
    spindle_test_send_signal("shipped", "not json");
    run = spindle_run_job("{\"wait\":\"shipped\"}");
    SPINDLE_EXPECT_STR(run->failure_code, "invalid-signal");
    SPINDLE_EXPECT_STR(run->failure_message, "the signal's body is not valid JSON");
    spindle_test_run_free(run);
}

static void config_and_secrets_come_from_the_test(void) {
    spindle_test_set_config("region", "eu");
    spindle_test_set_secret("key", "Jefe");
    spindle_test_run *run = spindle_run_job("{\"config\":true}");
    /* RFC 4231, test case 2. */
    SPINDLE_EXPECT_STR(spindle_test_output(run, "config"),
                       "{\"region\":\"eu\",\"placeholder\":\"{{spindle-secret:key:local}}\",\"missing\":false,"
                       "\"mac\":\"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843\"}");
    spindle_test_run_free(run);
    spindle_test_reset();
    run = spindle_run_job("{\"config\":true}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "config"), "{\"region\":null,\"placeholder\":null,\"missing\":false,\"mac\":\"\"}");
    spindle_test_run_free(run);
}

static void a_refusal_fails_the_job_and_runs_the_failure_hook(void) {
    spindle_test_run *run = spindle_run_job("{\"final\":\"refuse\"}");
    SPINDLE_EXPECT_STR(run->state, "failed");
    SPINDLE_EXPECT_STR(run->failure_step, "final");
    SPINDLE_EXPECT_STR(run->failure_code, "final-refused");
    SPINDLE_EXPECT_STR(run->failure_message, "refused as asked");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "final"), 1);
    SPINDLE_EXPECT_STR(run->logs[0].message, "step `final` refused final-refused: detail for the log only");
    SPINDLE_EXPECT_STR(run->hook, "on-failure");
    SPINDLE_EXPECT(run->hook_ok);
    SPINDLE_EXPECT_STR(run->logs[1].message, "compensating " SPINDLE_TEST_JOB_ID " for final-refused");
    spindle_test_run_free(run);
    run = spindle_run_job("{\"final\":\"refuse\",\"hook_fails\":true}");
    SPINDLE_EXPECT(!run->hook_ok);
    SPINDLE_EXPECT_STR(run->hook_code, "compensation-failed");
    SPINDLE_EXPECT_STR(run->hook_message, "could not compensate");
    spindle_test_run_free(run);
}

static void retries_end_with_the_budget(void) {
    spindle_test_run *run = spindle_run_job("{\"final\":\"retry\"}");
    SPINDLE_EXPECT_STR(run->failure_code, "final-retry");
    SPINDLE_EXPECT_STR(run->failure_message, "attempt 2 fails");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "final"), 2);
    spindle_test_run_free(run);
}

static spindle_heartbeat_reply cancel(const char *step, uint32_t attempt, unsigned beat, void *data) {
    (void)step, (void)attempt, (void)beat, (void)data;
    return SPINDLE_STOP_CANCELLED;
}

static void a_stop_is_reported_retryable_stopped(void) {
    spindle_test_set_heartbeat(cancel, NULL);
    spindle_test_run *run = spindle_run_job("{\"final\":\"stop\"}");
    SPINDLE_EXPECT_STR(spindle_test_call_of(run, "final", 0)->code, "stopped");
    spindle_test_run_free(run);
    spindle_test_reset();
    run = spindle_run_job("{\"final\":\"stop\"}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "final"), "\"kept alive\"");
    spindle_test_run_free(run);
}

static void a_capped_prior_output_is_asked_of_the_host(void) {
    spindle_test_run *run = spindle_run_job("{\"slices\":1,\"final\":\"prior\"}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "final"), "{\"in_input\":true,\"slices\":1}");
    spindle_test_run_free(run);
    spindle_test_set_prior_cap(4);
    run = spindle_run_job("{\"slices\":1,\"final\":\"prior\"}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "final"), "{\"in_input\":false,\"slices\":1}");
    spindle_test_run_free(run);
}

static void recorded_failures_win_and_name_the_place(void) {
    spindle_test_run *run = spindle_run_job("{\"final\":\"missing-prior\"}");
    SPINDLE_EXPECT_STR(run->failure_code, "missing-prior");
    SPINDLE_EXPECT_STR(run->failure_message, "step `never` has no output in this job");
    spindle_test_run_free(run);
    run = spindle_run_job("{\"final\":\"nested\",\"items\":[1,2.5]}");
    SPINDLE_EXPECT_STR(run->failure_code, "invalid-input");
    SPINDLE_EXPECT_STR(run->failure_message, "the job's input does not fit at `items[1]`: expected an integer");
    spindle_test_run_free(run);
    run = spindle_run_job("{\"final\":\"nested\",\"items\":[1]}");
    SPINDLE_EXPECT_STR(run->failure_message, "the job's input does not fit at `items[1]`: missing");
    spindle_test_run_free(run);
    run = spindle_run_job("{\"slices\":2}");
    SPINDLE_EXPECT_STR(run->state, "succeeded");
    spindle_test_run_free(run);
    run = spindle_test_run_step("slices", 1, "{\"slices\":2}", "[]");
    SPINDLE_EXPECT_STR(run->calls[0].code, "invalid-cursor");
    SPINDLE_EXPECT_STR(run->calls[0].message, "the step's cursor does not fit: expected an object");
    spindle_test_run_free(run);
}

static void outputs_may_be_raw_or_refused(void) {
    spindle_test_run *run = spindle_run_job("{\"final\":\"bytes\"}");
    SPINDLE_EXPECT_INT(run->outputs[0].len, 4);
    SPINDLE_EXPECT(memcmp(run->outputs[0].output, "\x01raw", 4) == 0);
    spindle_test_run_free(run);
    run = spindle_run_job("{\"final\":\"null-output\"}");
    SPINDLE_EXPECT_STR(run->failure_code, "invalid-output");
    spindle_test_run_free(run);
}

static void an_unknown_step_is_refused(void) {
    spindle_test_run *run = spindle_test_run_step("nope", 1, "{}", NULL);
    SPINDLE_EXPECT_STR(run->calls[0].outcome, "refused");
    SPINDLE_EXPECT_STR(run->calls[0].code, "unknown-step");
    SPINDLE_EXPECT_STR(run->logs[0].message, "step `nope` refused unknown-step: step key \"nope\"");
    spindle_test_run_free(run);
}

/* The constructors on their own, in this process: what each puts in the WIT variant. */
static void outcomes_carry_what_they_were_given(void) {
    spindle_outcome snooze = spindle_snooze(30);
    SPINDLE_EXPECT_INT(snooze.wit.tag, SPINDLE_JOB_TYPES_STEP_OUTCOME_SNOOZE);
    SPINDLE_EXPECT_INT(snooze.wit.val.snooze, 30);
    spindle_outcome more = spindle_with_cursor(spindle_more("a", 1, SPINDLE_TOTAL_UNKNOWN), "b");
    SPINDLE_EXPECT(!more.wit.val.more.total.is_some);
    SPINDLE_EXPECT(more.wit.val.more.cursor.len == 1 && more.wit.val.more.cursor.ptr[0] == 'b');
    spindle_outcome skip = spindle_with_cursor(spindle_skip("%s", ""), "ignored");
    SPINDLE_EXPECT_INT(skip.wit.tag, SPINDLE_JOB_TYPES_STEP_OUTCOME_SKIP);
    spindle_outcome bare = spindle_refused("bad-amount", "%s", "");
    SPINDLE_EXPECT(bare.wit.val.refused.message.len == 10); /* a bare code reads as its message */
    spindle_outcome signal = spindle_with_cursor(spindle_await_signal("go", 5), "c");
    SPINDLE_EXPECT(signal.wit.val.await_signal.cursor.is_some);
    spindle_outcome *all[] = {&snooze, &more, &skip, &bare, &signal};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) spindle_outcome_free(all[i]);
}

int main(void) {
    SPINDLE_TEST(describes_every_field);
    SPINDLE_TEST(more_calls_again_with_the_cursor);
    SPINDLE_TEST(children_echo_their_input_by_default);
    SPINDLE_TEST(a_handler_settles_children_and_any_leaves_the_rest_open);
    SPINDLE_TEST(a_child_without_input_is_refused);
    SPINDLE_TEST(a_signal_is_delivered_else_the_wait_times_out);
    SPINDLE_TEST(config_and_secrets_come_from_the_test);
    SPINDLE_TEST(a_refusal_fails_the_job_and_runs_the_failure_hook);
    SPINDLE_TEST(retries_end_with_the_budget);
    SPINDLE_TEST(a_stop_is_reported_retryable_stopped);
    SPINDLE_TEST(a_capped_prior_output_is_asked_of_the_host);
    SPINDLE_TEST(recorded_failures_win_and_name_the_place);
    SPINDLE_TEST(outputs_may_be_raw_or_refused);
    SPINDLE_TEST(an_unknown_step_is_refused);
    SPINDLE_TEST(outcomes_carry_what_they_were_given);
    return spindle_test_finish();
}
