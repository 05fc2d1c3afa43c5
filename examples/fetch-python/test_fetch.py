"""The fetch kind under the SDK's local runner, an upstream answered by a handler."""

import json
import unittest

from spindle_guest import http
from spindle_guest.testing import run_job

from fetch import kind

INPUT = {"url": "https://api.example/hook", "denied_url": "https://elsewhere.example/", "message": "hi"}


def upstream(seen):
    def answer(request: http.Request) -> http.Response:
        if request.url != INPUT["url"]:
            raise http.Denied("no rule allows it")
        seen.append(request)
        return http.Response(200, b'{"ok": true}', [])

    return answer


class FetchTest(unittest.TestCase):
    def test_the_secret_goes_in_the_header_and_the_denial_is_caught(self) -> None:
        seen = []
        run = run_job(kind, INPUT, secrets={"api-token": "s3cr3t"}, http=upstream(seen))
        self.assertTrue(run.succeeded, run.failure)
        self.assertEqual(run.output("call")["status"], 200)
        self.assertEqual(run.output("call")["body"], '{"ok": true}')
        self.assertTrue(run.output("call")["denied"])
        self.assertEqual(seen[0].header("authorization"), "Bearer s3cr3t")
        self.assertEqual(json.loads(seen[0].body), {"message": "hi"})

    def test_an_error_status_is_retried(self) -> None:
        run = run_job(kind, INPUT, http=lambda request: http.Response(503, b"", []))
        self.assertFalse(run.succeeded)
        self.assertEqual(run.failure.code, "upstream-status")


if __name__ == "__main__":
    unittest.main()
