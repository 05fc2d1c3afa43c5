"""The fetch kind: one outbound call with a secret the guest never holds, and one the host
denies. The same kind in every guest language (examples/fetch-*), for the suite's check
that each language's HTTP client goes through the host's outbound policy alike.

Input: {"url": "...", "denied_url": "...", "message": "text"}. `call` POSTs
{"message": ...} as JSON to `url` with `authorization: Bearer <placeholder of the secret
api-token>` (the host puts the value in), then POSTs the same body to `denied_url`,
which the deployment does not allow, and catches the typed denial.
Output: {"status": 200, "body": "...", "denied": true, "denied_error": "..."}.
"""

from spindle_guest import Kind, Retryable, Step, config, http

kind = Kind("fetch-python")


@kind.step("call")
def call(step: Step) -> object:
    request = step.input()
    body = {"message": request["message"]}
    headers = {"content-type": "application/json"}
    token = config.secret("api-token")
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    response = http.post(request["url"], headers=headers, json=body)
    if not response.is_success:
        raise Retryable("upstream-status", f"the upstream answered {response.status}")
    try:
        http.post(request["denied_url"], headers={"content-type": "application/json"}, json=body)
        denied, denied_error = False, ""
    except http.Denied as e:
        denied, denied_error = True, f"{type(e).__name__}: {e}"
    return {"status": response.status, "body": response.text, "denied": denied, "denied_error": denied_error}
