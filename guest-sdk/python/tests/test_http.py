"""The HTTP client off a host: URLs, bodies, statuses, and the handler a test sets."""

import unittest
from typing import List

from spindle_guest import Kind, Refused, Retryable, Step, config, http
from spindle_guest.http import Request, Response, split_url
from spindle_guest.testing import local_host, run_job


class UrlTest(unittest.TestCase):
    def test_splits_scheme_authority_and_path_with_query(self) -> None:
        cases = {
            "https://api.example.com/v1/x?y=1": ("https", "api.example.com", "/v1/x?y=1"),
            "HTTP://127.0.0.1:8080": ("http", "127.0.0.1:8080", "/"),
            "http://[::1]:80?q": ("http", "[::1]:80", "/?q"),
            "http://h/p#frag": ("http", "h", "/p"),
        }
        for url, parts in cases.items():
            target = split_url(url)
            self.assertEqual((target.scheme, target.authority, target.path_with_query), parts, url)

    def test_refuses_what_cannot_be_sent(self) -> None:
        for url in ["api.example.com/x", "://h/x", "http:///x", "http://user:pw@h/x", "http://h/a b", "ht tp://h/"]:
            with self.subTest(url=url), self.assertRaises(http.InvalidRequest):
                split_url(url)


class ClientTest(unittest.TestCase):
    def test_json_bodies_set_a_content_type_once_and_secrets_are_revealed_to_the_upstream(self) -> None:
        seen: List[Request] = []

        def upstream(request: Request) -> Response:
            seen.append(request)
            return Response(200, b'{"eur": 0.9}', [("Content-Type", b"application/json")])

        with local_host(secrets={"token": "s3cr3t"}, http=upstream):
            token = config.secret("token")
            response = http.post("https://api.example.com/x", json={"a": 1}, headers={"authorization": f"Bearer {token}"})
            http.put("https://api.example.com/x", json=[1], headers=[("Content-Type", "application/vnd+json")])
        self.assertEqual(response.json(), {"eur": 0.9})
        self.assertEqual(response.header("content-type"), "application/json")
        self.assertEqual(seen[0].body, b'{"a":1}')
        self.assertEqual(seen[0].header("authorization"), "Bearer s3cr3t")
        self.assertEqual(seen[0].header("content-type"), "application/json")
        self.assertEqual([name for name, _ in seen[1].headers], ["Content-Type"])

    def test_error_statuses_become_the_matching_step_failures(self) -> None:
        self.assertEqual(Response(204).raise_for_status().status, 204)
        for status, failure in [(429, Retryable), (503, Retryable), (400, Refused), (404, Refused)]:
            with self.subTest(status=status), self.assertRaises(failure) as e:
                Response(status, b"secret body").raise_for_status()
            self.assertEqual(e.exception.code, f"upstream-{status}")
            self.assertNotIn("secret", e.exception.message)
        with self.assertRaises(Refused) as malformed:
            Response(200, b"<html>").json()
        self.assertEqual(malformed.exception.code, "invalid-response")

    def test_a_body_that_does_not_serialise_is_an_invalid_request(self) -> None:
        with local_host(http=lambda request: Response(200)), self.assertRaises(http.InvalidRequest):
            http.post("http://h/x", json={1j: 2})

    def test_without_a_handler_a_step_retries_upstream_unavailable(self) -> None:
        kind = Kind("caller")

        @kind.step("call")
        def call(step: Step) -> int:
            return http.get("https://api.example.com/ping").raise_for_status().status

        run = run_job(kind, {})
        self.assertEqual((run.failure.code, len(run.calls)), ("upstream-unavailable", 3))  # type: ignore[union-attr]
        self.assertIn("no outbound HTTP off a host", run.log_messages()[0])
        def deny(request: Request) -> Response:
            raise http.Denied()

        denied = run_job(kind, {}, http=deny)
        self.assertEqual((denied.failure.code, len(denied.calls)), ("http-request-denied", 1))  # type: ignore[union-attr]
        ok = run_job(kind, {}, http=lambda request: Response(204))
        self.assertEqual(ok.output("call"), 204)


if __name__ == "__main__":
    unittest.main()
