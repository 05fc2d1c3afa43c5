/* The fetch kind's local test: whole jobs through the SDK's native runner, its
 * outbound requests answered by a fake upstream (no host, no wasm, no network). */
#include "spindle_testing.h"

#define JOB "{\"url\":\"https://hooks.test/hook\",\"denied_url\":\"https://elsewhere.test/\",\"message\":\"hi\"}"

/* What the fake upstream does: answer `status` at hooks.test and deny the rest, as a
 * deployment that allows only the hook would; or fail every request with `fail`. */
typedef struct upstream {
    uint16_t status;
    spindle_http_error fail;
    bool allow_all;
} upstream;

static spindle_http_error fake_upstream(const spindle_test_http_request *request, spindle_test_http_reply *reply,
                                        void *data) {
    const upstream *up = (const upstream *)data;
    if (up->fail) return up->fail;
    if (!up->allow_all && strcmp(request->authority, "hooks.test") != 0) return SPINDLE_HTTP_DENIED;
    static const spindle_http_header headers[] = {{"content-type", "application/json"}};
    reply->status = up->status;
    reply->headers = headers;
    reply->header_count = 1;
    reply->body = "{\"ok\":true}";
    return SPINDLE_HTTP_OK;
}

static void posts_the_message_with_the_token_and_meets_the_denial(void) {
    upstream up = {200, SPINDLE_HTTP_OK, false};
    spindle_test_set_http(fake_upstream, &up);
    spindle_test_set_secret("api-token", "s3cret");
    spindle_test_run *run = spindle_run_job(JOB);
    SPINDLE_EXPECT_STR(run->state, "succeeded");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "call"),
                       "{\"status\":200,\"body\":\"{\\\"ok\\\":true}\",\"denied\":true,\"denied_error\":\"denied\"}");
    if (SPINDLE_EXPECT_INT(run->http_call_count, 2)) {
        const spindle_test_http_call *post = &run->http_calls[0];
        SPINDLE_EXPECT_STR(post->method, "POST");
        SPINDLE_EXPECT_STR(post->url, "https://hooks.test/hook");
        SPINDLE_EXPECT_STR(spindle_test_http_header(post, "content-type"), "application/json");
        SPINDLE_EXPECT_STR(spindle_test_http_header(post, "authorization"), "Bearer s3cret"); /* put in place */
        SPINDLE_EXPECT_STR(spindle_test_http_header(post, "content-length"), "16");
        SPINDLE_EXPECT_STR(post->body, "{\"message\":\"hi\"}");
        const spindle_test_http_call *denied = &run->http_calls[1];
        SPINDLE_EXPECT_STR(denied->url, "https://elsewhere.test/");
        SPINDLE_EXPECT_STR(denied->body, "{\"message\":\"hi\"}");
        SPINDLE_EXPECT_STR(denied->error, "denied");
    }
    spindle_test_run_free(run);
}

static void without_the_secret_no_authorization_is_sent(void) {
    upstream up = {200, SPINDLE_HTTP_OK, false};
    spindle_test_set_http(fake_upstream, &up);
    spindle_test_run *run = spindle_run_job(JOB);
    SPINDLE_EXPECT_STR(run->state, "succeeded");
    if (SPINDLE_EXPECT_INT(run->http_call_count, 2))
        SPINDLE_EXPECT_STR(spindle_test_http_header(&run->http_calls[0], "authorization"), NULL);
    spindle_test_run_free(run);
}

static void an_allowed_second_request_is_not_a_denial(void) {
    upstream up = {200, SPINDLE_HTTP_OK, true};
    spindle_test_set_http(fake_upstream, &up);
    spindle_test_run *run = spindle_run_job(JOB);
    SPINDLE_EXPECT_STR(spindle_test_output(run, "call"),
                       "{\"status\":200,\"body\":\"{\\\"ok\\\":true}\",\"denied\":false,\"denied_error\":\"\"}");
    spindle_test_run_free(run);
}

static void a_status_other_than_2xx_is_retried(void) {
    upstream up = {404, SPINDLE_HTTP_OK, false};
    spindle_test_set_http(fake_upstream, &up);
    spindle_test_run *run = spindle_run_job(JOB);
    SPINDLE_EXPECT_STR(run->state, "failed");
    SPINDLE_EXPECT_STR(run->failure_code, "upstream-404");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "call"), 3); /* the whole budget */
    SPINDLE_EXPECT_INT(run->http_call_count, 3);               /* no second request after a failure */
    spindle_test_run_free(run);
}

static void an_unreachable_upstream_is_retried(void) {
    upstream up = {200, SPINDLE_HTTP_CONNECT_FAILED, false};
    spindle_test_set_http(fake_upstream, &up);
    spindle_test_run *run = spindle_run_job(JOB);
    SPINDLE_EXPECT_STR(run->failure_code, "upstream-unavailable");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "call"), 3);
    SPINDLE_EXPECT_STR(run->logs[0].message,
                       "step `call` retryable upstream-unavailable: connect-failed: connection-refused");
    spindle_test_run_free(run);
}

static void a_denied_first_request_is_refused(void) {
    upstream up = {200, SPINDLE_HTTP_DENIED, false};
    spindle_test_set_http(fake_upstream, &up);
    spindle_test_run *run = spindle_run_job(JOB);
    SPINDLE_EXPECT_STR(run->failure_code, "http-request-denied");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "call"), 1);
    spindle_test_run_free(run);
}

static void refuses_input_without_the_fields(void) {
    static const char *const payloads[] = {"{}", "{\"url\":\"https://hooks.test/\",\"message\":\"hi\"}",
                                           "{\"url\":1,\"denied_url\":\"x\",\"message\":\"hi\"}", "not json"};
    for (size_t i = 0; i < sizeof payloads / sizeof *payloads; i++) {
        spindle_test_run *run = spindle_run_job(payloads[i]);
        SPINDLE_EXPECT_STR(run->failure_code, "invalid-input");
        SPINDLE_EXPECT_INT(run->http_call_count, 0);
        spindle_test_run_free(run);
    }
}

int main(void) {
    SPINDLE_TEST(posts_the_message_with_the_token_and_meets_the_denial);
    SPINDLE_TEST(without_the_secret_no_authorization_is_sent);
    SPINDLE_TEST(an_allowed_second_request_is_not_a_denial);
    SPINDLE_TEST(a_status_other_than_2xx_is_retried);
    SPINDLE_TEST(an_unreachable_upstream_is_retried);
    SPINDLE_TEST(a_denied_first_request_is_refused);
    SPINDLE_TEST(refuses_input_without_the_fields);
    return spindle_test_finish();
}
