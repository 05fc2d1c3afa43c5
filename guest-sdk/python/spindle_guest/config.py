"""The kind's deployment settings and its tenant's secrets.

Settings are plain values set per deployment (`spindle deploy KIND FILE --set
NAME=VALUE`). Secrets belong to the tenant and the guest never holds one: a deployment
declares the names it uses (`--secret NAME@RULE`), `secret` hands back a placeholder, and the
host puts the value in its place in the headers of outbound requests its policy allows
(in bodies too, if the deployment opted in). `hmac_sha256` signs with a secret for
payloads that need a signature instead.

    token = config.secret("rates-token")
    if token is None:
        raise Refused("missing-secret", "rates-token is not set")
    http.get(url, headers={"authorization": f"Bearer {token}"})

In a kind's tests the answers come from what `testing.run_job` was given.
"""

from __future__ import annotations

from typing import Optional, Union

from . import _host

__all__ = ["get", "secret", "hmac_sha256"]


def get(name: str) -> Optional[str]:
    """The deployment's setting `name`, if set."""
    return _host.current().config_get(name)


def secret(name: str) -> Optional[str]:
    """A placeholder standing for the tenant's secret `name`, if the deployment declared it
    and the tenant set it. Opaque and different on each call: put it in a header, do not
    store or compare it."""
    return _host.current().secret(name)


def hmac_sha256(secret_name: str, message: Union[bytes, str]) -> Optional[bytes]:
    """HMAC-SHA256 of `message` (text as UTF-8) under the tenant's secret `secret_name`,
    signed by the host without the guest holding the key; `None` if the secret is not
    available."""
    data = message.encode("utf-8") if isinstance(message, str) else bytes(message)
    return _host.current().hmac_sha256(secret_name, data)
