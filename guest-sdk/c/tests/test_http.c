/* The C SDK's HTTP client: the http-probe kind's requests through the local runner's
 * wasi:http, answered by handlers here, and the error mapping on its own. run.sh runs
 * it with SPINDLE_TEST_LEAKS set, so a call that leaves memory allocated or a wasi:http
 * resource undropped, on any path, fails. */
#include "spindle_testing.h"

static const spindle_http_error every_error[] = {
    SPINDLE_HTTP_DENIED,           SPINDLE_HTTP_INVALID_REQUEST, SPINDLE_HTTP_TIMEOUT, SPINDLE_HTTP_TOO_LARGE,
    SPINDLE_HTTP_CONNECTION_LIMIT, SPINDLE_HTTP_CONNECT_FAILED,  SPINDLE_HTTP_OTHER,
};

/* The outcomes in this process: what each error and error status means for a step. */
static void errors_have_names_and_outcomes(void) {
    static const char *const names[] = {"denied",           "invalid-request", "timeout", "too-large",
                                        "connection-limit", "connect-failed",  "other"};
    static const char *const codes[] = {"http-request-denied",  "http-request-invalid", "upstream-unavailable",
                                        "upstream-unavailable", "upstream-unavailable", "upstream-unavailable",
                                        "upstream-unavailable"};
    SPINDLE_EXPECT_STR(spindle_http_error_name(SPINDLE_HTTP_OK), "ok");
    SPINDLE_EXPECT_STR(spindle_http_error_name((spindle_http_error)99), "other");
    for (size_t i = 0; i < sizeof every_error / sizeof *every_error; i++) {
        SPINDLE_EXPECT_STR(spindle_http_error_name(every_error[i]), names[i]);
        spindle_outcome outcome = spindle_http_failure(every_error[i], NULL);
        bool refused = i < 2;
        SPINDLE_EXPECT_INT(outcome.wit.tag,
                           refused ? SPINDLE_JOB_TYPES_STEP_OUTCOME_REFUSED : SPINDLE_JOB_TYPES_STEP_OUTCOME_RETRYABLE);
        const spindle_job_types_failure_t *failure = refused ? &outcome.wit.val.refused : &outcome.wit.val.retryable;
        SPINDLE_EXPECT(failure->code.len == strlen(codes[i]) && memcmp(failure->code.ptr, codes[i], failure->code.len) == 0);
        SPINDLE_EXPECT_STR(outcome.detail, names[i]);
        spindle_outcome_free(&outcome);
    }
    spindle_http_response response;
    memset(&response, 0, sizeof response);
    snprintf(response.error_detail, sizeof response.error_detail, "HTTP-request-denied");
    spindle_outcome denied = spindle_http_failure(SPINDLE_HTTP_DENIED, &response);
    SPINDLE_EXPECT_STR(denied.detail, "denied: HTTP-request-denied"); /* for the log only */
    spindle_outcome_free(&denied);

    static const struct { uint16_t status; uint8_t tag; const char *code; } statuses[] = {
        {503, SPINDLE_JOB_TYPES_STEP_OUTCOME_RETRYABLE, "upstream-503"},
        {429, SPINDLE_JOB_TYPES_STEP_OUTCOME_RETRYABLE, "upstream-429"},
        {404, SPINDLE_JOB_TYPES_STEP_OUTCOME_REFUSED, "upstream-404"},
        {200, SPINDLE_JOB_TYPES_STEP_OUTCOME_REFUSED, "no-failure"},
    };
    for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++) {
        response.status = statuses[i].status;
        spindle_outcome outcome = spindle_http_status_failure(&response);
        SPINDLE_EXPECT_INT(outcome.wit.tag, statuses[i].tag);
        const spindle_job_types_failure_t *failure =
            outcome.wit.tag == SPINDLE_JOB_TYPES_STEP_OUTCOME_REFUSED ? &outcome.wit.val.refused : &outcome.wit.val.retryable;
        SPINDLE_EXPECT(failure->code.len == strlen(statuses[i].code) &&
                       memcmp(failure->code.ptr, statuses[i].code, failure->code.len) == 0);
        spindle_outcome_free(&outcome);
    }
}

/* Answers 201 with the request's body, and says what it saw in headers. */
static spindle_http_error echo(const spindle_test_http_request *request, spindle_test_http_reply *reply, void *data) {
    (void)data;
    static spindle_http_header headers[2];
    headers[0] = (spindle_http_header){"Content-Type", "text/plain"};
    headers[1] = (spindle_http_header){"x-method", request->method};
    reply->status = 201;
    reply->headers = headers;
    reply->header_count = 2;
    reply->body = request->body; /* lives until the handler returns: copied */
    reply->body_len = request->body_len;
    return SPINDLE_HTTP_OK;
}

static void a_post_goes_with_its_headers_body_and_length(void) {
    spindle_test_set_http(echo, NULL);
    spindle_test_set_secret("api-token", "tok-value");
    spindle_test_run *run = spindle_run_job(
        "{\"send\":{\"method\":\"post\",\"url\":\"HTTPS://api.test/v1/items?x=1#frag\","
        "\"headers\":[[\"Content-Type\",\"application/json\"],[\"x-skipped\",null]],"
        "\"bearer_secret\":\"api-token\",\"body\":\"{\\\"n\\\":1}\"}}");
    SPINDLE_EXPECT_STR(run->state, "succeeded");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "send"),
                       "{\"error\":\"ok\",\"detail\":\"\",\"status\":201,\"looked_up\":\"text/plain\",\"header_count\":2,"
                       "\"body\":\"{\\\"n\\\":1}\",\"body_len\":7}");
    if (SPINDLE_EXPECT_INT(run->http_call_count, 1)) {
        const spindle_test_http_call *call = &run->http_calls[0];
        SPINDLE_EXPECT_STR(call->step, "send");
        SPINDLE_EXPECT_STR(call->method, "POST");
        SPINDLE_EXPECT_STR(call->url, "https://api.test/v1/items?x=1");
        SPINDLE_EXPECT_INT(call->header_count, 3);
        SPINDLE_EXPECT_STR(spindle_test_http_header(call, "content-type"), "application/json");
        SPINDLE_EXPECT_STR(spindle_test_http_header(call, "Authorization"), "Bearer tok-value"); /* in place */
        SPINDLE_EXPECT_STR(spindle_test_http_header(call, "content-length"), "7");
        SPINDLE_EXPECT_STR(spindle_test_http_header(call, "x-skipped"), NULL);
        SPINDLE_EXPECT_STR(call->body, "{\"n\":1}");
        SPINDLE_EXPECT_INT(call->body_writes, 1);
        SPINDLE_EXPECT_INT(call->status, 201);
        SPINDLE_EXPECT_STR(call->error, NULL);
    }
    spindle_test_run_free(run);

    /* No secret set: no placeholder, and a NULL value leaves the header out. */
    spindle_test_reset();
    spindle_test_set_http(echo, NULL);
    run = spindle_run_job("{\"send\":{\"method\":\"PUT\",\"url\":\"http://api.test\",\"bearer_secret\":\"api-token\","
                          "\"headers\":[[\"Content-Length\",\"2\"]],\"body\":\"ok\"}}");
    if (SPINDLE_EXPECT_INT(run->http_call_count, 1)) {
        const spindle_test_http_call *call = &run->http_calls[0];
        SPINDLE_EXPECT_STR(call->url, "http://api.test/");
        SPINDLE_EXPECT_STR(spindle_test_http_header(call, "authorization"), NULL);
        SPINDLE_EXPECT_INT(call->header_count, 1); /* the kind's own content-length, not a second one */
    }
    spindle_test_run_free(run);
}

static char big_reply[100000];

static spindle_http_error big(const spindle_test_http_request *request, spindle_test_http_reply *reply, void *data) {
    (void)request, (void)data;
    reply->body = big_reply;
    reply->body_len = sizeof big_reply;
    return SPINDLE_HTTP_OK;
}

static void large_bodies_go_in_pieces(void) {
    memset(big_reply, 'z', sizeof big_reply);
    spindle_test_set_http(big, NULL);
    spindle_test_run *run =
        spindle_run_job("{\"send\":{\"method\":\"POST\",\"url\":\"http://api.test/up\",\"body_size\":10000}}");
    if (SPINDLE_EXPECT_INT(run->http_call_count, 1)) {
        const spindle_test_http_call *call = &run->http_calls[0];
        SPINDLE_EXPECT_INT(call->body_writes, 3); /* 4096 + 4096 + 1808 */
        SPINDLE_EXPECT_STR(spindle_test_http_header(call, "content-length"), "10000");
        SPINDLE_EXPECT_INT(call->body_len, 10000);
        SPINDLE_EXPECT(call->body_len == 10000 && call->body[0] == 'a' && call->body[9999] == 'a' + 9999 % 26);
        SPINDLE_EXPECT_STR(spindle_test_http_header(call, "transfer-encoding"), NULL);
    }
    const char *out = spindle_test_output(run, "send");
    SPINDLE_EXPECT(out && strstr(out, "\"body_len\":100000}"));
    spindle_test_run_free(run);
}

static void a_get_without_a_body_sends_none(void) {
    spindle_test_set_http(echo, NULL);
    spindle_test_run *run = spindle_run_job("{\"send\":{\"url\":\"https://api.test/items\"}}");
    if (SPINDLE_EXPECT_INT(run->http_call_count, 1)) {
        SPINDLE_EXPECT_STR(run->http_calls[0].method, "GET");
        SPINDLE_EXPECT_INT(run->http_calls[0].body_writes, 0);
        SPINDLE_EXPECT_INT(run->http_calls[0].header_count, 0);
    }
    SPINDLE_EXPECT_STR(spindle_test_output(run, "send"),
                       "{\"error\":\"ok\",\"detail\":\"\",\"status\":201,\"looked_up\":\"text/plain\",\"header_count\":2,"
                       "\"body\":\"\",\"body_len\":0}");
    spindle_test_run_free(run);
}

/* Answers with the error `data` points to. */
static spindle_http_error fail_with(const spindle_test_http_request *request, spindle_test_http_reply *reply,
                                    void *data) {
    (void)request, (void)reply;
    return *(const spindle_http_error *)data;
}

static void a_handler_error_reaches_the_kind_typed(void) {
    static const char *const details[] = {"HTTP-request-denied", "HTTP-request-URI-invalid", "connection-timeout",
                                          "HTTP-response-body-size", "connection-limit-reached", "connection-refused",
                                          "internal-error (the test's handler answered SPINDLE_HTTP_OTHER)"};
    for (size_t i = 0; i < sizeof every_error / sizeof *every_error; i++) {
        spindle_test_set_http(fail_with, (void *)&every_error[i]);
        spindle_test_run *run = spindle_run_job("{\"send\":{\"method\":\"POST\",\"url\":\"https://api.test/\",\"body\":\"x\"}}");
        char expected[300];
        snprintf(expected, sizeof expected,
                 "{\"error\":\"%s\",\"detail\":\"%s\",\"status\":0,\"looked_up\":null,\"header_count\":0,\"body\":null,"
                 "\"body_len\":0}",
                 spindle_http_error_name(every_error[i]), details[i]);
        SPINDLE_EXPECT_STR(spindle_test_output(run, "send"), expected);
        if (SPINDLE_EXPECT_INT(run->http_call_count, 1)) {
            SPINDLE_EXPECT_STR(run->http_calls[0].error, spindle_http_error_name(every_error[i]));
            SPINDLE_EXPECT_STR(run->http_calls[0].body, "x"); /* written before the answer */
        }
        spindle_test_run_free(run);
    }
}

static void a_failure_is_refused_or_retried_as_it_means(void) {
    const char *job = "{\"send\":{\"method\":\"POST\",\"url\":\"https://api.test/\",\"body\":\"x\",\"fail\":true}}";
    spindle_test_set_http(fail_with, (void *)&every_error[0]); /* denied */
    spindle_test_run *run = spindle_run_job(job);
    SPINDLE_EXPECT_STR(run->failure_code, "http-request-denied");
    SPINDLE_EXPECT_STR(run->failure_message, "the outbound request is not allowed by policy");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "send"), 1);
    SPINDLE_EXPECT_STR(run->logs[0].message, "step `send` refused http-request-denied: denied: HTTP-request-denied");
    spindle_test_run_free(run);
    spindle_test_set_http(fail_with, (void *)&every_error[2]); /* timeout */
    run = spindle_run_job(job);
    SPINDLE_EXPECT_STR(run->failure_code, "upstream-unavailable");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "send"), 2); /* the budget */
    spindle_test_run_free(run);
    spindle_test_set_http(echo, NULL); /* 201 */
    run = spindle_run_job(job);
    SPINDLE_EXPECT_STR(run->state, "succeeded");
    spindle_test_run_free(run);
}

static spindle_http_error unavailable(const spindle_test_http_request *request, spindle_test_http_reply *reply,
                                      void *data) {
    (void)request, (void)data;
    reply->status = 503;
    reply->body = "busy";
    return SPINDLE_HTTP_OK;
}

static void an_error_status_is_a_response_not_an_error(void) {
    spindle_test_set_http(unavailable, NULL);
    spindle_test_run *run = spindle_run_job("{\"send\":{\"url\":\"https://api.test/\"}}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "send"),
                       "{\"error\":\"ok\",\"detail\":\"\",\"status\":503,\"looked_up\":null,\"header_count\":0,"
                       "\"body\":\"busy\",\"body_len\":4}");
    spindle_test_run_free(run);
    run = spindle_run_job("{\"send\":{\"url\":\"https://api.test/\",\"fail\":true}}");
    SPINDLE_EXPECT_STR(run->failure_code, "upstream-503");
    SPINDLE_EXPECT_INT(spindle_test_calls_of(run, "send"), 2);
    spindle_test_run_free(run);
}

static void without_a_handler_a_request_fails_as_other(void) {
    spindle_test_run *run = spindle_run_job("{\"send\":{\"method\":\"POST\",\"url\":\"https://api.test/\",\"body\":\"x\"}}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "send"),
                       "{\"error\":\"other\",\"detail\":\"internal-error (no HTTP handler in the local runner)\","
                       "\"status\":0,\"looked_up\":null,\"header_count\":0,\"body\":null,\"body_len\":0}");
    SPINDLE_EXPECT(strstr(run->stderr_text, "no HTTP handler answers POST https://api.test/") != NULL);
    if (SPINDLE_EXPECT_INT(run->http_call_count, 1)) SPINDLE_EXPECT_STR(run->http_calls[0].error, "other");
    spindle_test_run_free(run);
}

static void a_malformed_request_never_leaves(void) {
    static const struct { const char *send, *detail; } cases[] = {
        {"\"url\":\"api.test/x\"", "the URL has no scheme (expected `http://` or `https://`)"},
        {"\"url\":\"https://user:pw@api.test/\"", "the URL carries credentials (put them in a header)"},
        {"\"url\":\"https:///path\"", "the URL has no host"},
        {"\"url\":\"https://api.test/a b\"", "the URL contains whitespace or control characters"},
        {"\"url\":\"ht tp://api.test/\"", "the URL contains whitespace or control characters"},
        {"\"url\":\"h_t://api.test/\"", "the URL's scheme is malformed"},
        {"\"url\":\"https://api.test/\",\"headers\":[[\"transfer-encoding\",\"chunked\"]]",
         "header `transfer-encoding` may not be set by a guest"},
        {"\"url\":\"https://api.test/\",\"headers\":[[\"x-a\",\"line\\nbreak\"]]", "header `x-a` is malformed"},
        {"\"url\":\"https://api.test/\",\"headers\":[[\"bad name\",\"v\"]]", "header `bad name` is malformed"},
        {"\"url\":\"https://api.test/\",\"method\":\"GE T\"", "the request's method is not valid"},
    };
    spindle_test_set_http(echo, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char job[300], expected[300];
        snprintf(job, sizeof job, "{\"send\":{%s,\"body\":\"x\"}}", cases[i].send);
        spindle_test_run *run = spindle_run_job(job);
        snprintf(expected, sizeof expected,
                 "{\"error\":\"invalid-request\",\"detail\":\"%s\",\"status\":0,\"looked_up\":null,\"header_count\":0,"
                 "\"body\":null,\"body_len\":0}",
                 cases[i].detail);
        SPINDLE_EXPECT_STR(spindle_test_output(run, "send"), expected);
        SPINDLE_EXPECT_INT(run->http_call_count, 0);
        spindle_test_run_free(run);
    }
}

static void the_response_body_is_capped(void) {
    spindle_test_set_http(unavailable, NULL); /* "busy": 4 bytes */
    spindle_test_run *run = spindle_run_job("{\"send\":{\"url\":\"https://api.test/\",\"max\":3}}");
    SPINDLE_EXPECT_STR(spindle_test_output(run, "send"),
                       "{\"error\":\"too-large\",\"detail\":\"the response body is larger than 3 bytes\",\"status\":0,"
                       "\"looked_up\":null,\"header_count\":0,\"body\":null,\"body_len\":0}");
    spindle_test_run_free(run);
    run = spindle_run_job("{\"send\":{\"url\":\"https://api.test/\",\"max\":4}}");
    const char *out = spindle_test_output(run, "send");
    SPINDLE_EXPECT(out && strstr(out, "\"body\":\"busy\""));
    spindle_test_run_free(run);
}

/* The stand-in's own checks, on a kind that misuses the raw bindings. */
static void the_runner_catches_what_the_host_traps_on(void) {
    setenv("SPINDLE_TEST_LEAKS", "1", 1);
    spindle_test_run *run = spindle_test_run_step("raw", 1, "{\"raw\":\"leak\"}", NULL);
    SPINDLE_EXPECT_STR(run->calls[0].code, "test.undropped-resource");
    SPINDLE_EXPECT(strstr(run->calls[0].stderr_text, "undropped: fields 1") != NULL);
    spindle_test_run_free(run);
    run = spindle_test_run_step("raw", 1, "{\"raw\":\"parent-first\"}", NULL);
    SPINDLE_EXPECT_STR(run->calls[0].code, "sandbox.panic");
    SPINDLE_EXPECT(strstr(run->calls[0].stderr_text, "outgoing-body 3 dropped while its output-stream 4 lives") != NULL);
    spindle_test_run_free(run);
}

int main(void) {
    SPINDLE_TEST(errors_have_names_and_outcomes);
    SPINDLE_TEST(a_post_goes_with_its_headers_body_and_length);
    SPINDLE_TEST(large_bodies_go_in_pieces);
    SPINDLE_TEST(a_get_without_a_body_sends_none);
    SPINDLE_TEST(a_handler_error_reaches_the_kind_typed);
    SPINDLE_TEST(a_failure_is_refused_or_retried_as_it_means);
    SPINDLE_TEST(an_error_status_is_a_response_not_an_error);
    SPINDLE_TEST(without_a_handler_a_request_fails_as_other);
    SPINDLE_TEST(a_malformed_request_never_leaves);
    SPINDLE_TEST(the_response_body_is_capped);
    SPINDLE_TEST(the_runner_catches_what_the_host_traps_on);
    return spindle_test_finish();
}
