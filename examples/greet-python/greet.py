"""The greet kind in Python: compose a greeting, then deliver it once per job.

Its behaviour is the same in every guest language (see the polyglot spec): its input
schema (derived from `GreetInput`) has the host refuse a submission without a non-empty
string `name`; `compose` refuses such input itself too (the local runner, and any caller
that bypasses the schema) and, asked to `explode`, fails with Python's natural uncaught
error; `deliver` fails its first attempt when asked to be `flaky`.
"""

from dataclasses import dataclass
from typing import Annotated, Dict

from spindle_guest import Kind, Retryable, RetryPolicy, Schema, Step, log


@dataclass
class GreetInput:
    """The job's input: who to greet, and the failures to demonstrate."""

    name: Annotated[str, "who to greet", Schema(minLength=1)]
    flaky: Annotated[bool, "fail deliver's first attempt"] = False
    explode: Annotated[bool, "fail compose with an uncaught exception"] = False

    def __post_init__(self) -> None:
        # Raised while the SDK builds the input, so it is refused `invalid-input`.
        if not self.name:
            raise ValueError("`name` must not be empty")


@dataclass
class Composed:
    """`compose`'s output, read back by `deliver`."""

    text: str


# `input=` declares GreetInput's JSON Schema: the host checks submissions against it.
kind = Kind("greet-python", input=GreetInput, retry=RetryPolicy(max_attempts=3, initial_backoff_ms=100, max_backoff_ms=1000))


@kind.step("compose", output=Composed)
def compose(step: Step) -> Composed:
    request = step.input(GreetInput)
    if request.explode:
        # A lookup of a key nobody set: the KeyError escapes, and the SDK reports it as
        # retryable `uncaught-exception` with its traceback on stderr.
        greetings: Dict[str, str] = {}
        return Composed(greetings["missing"])
    log.info(f"composing a greeting for {request.name}")
    return Composed(f"Hello, {request.name}!")


@kind.step("deliver")
def deliver(step: Step) -> Dict[str, object]:
    composed = step.prior("compose", Composed)
    request = step.input(GreetInput)
    step.heartbeat()
    if request.flaky and step.attempt == 1:
        raise Retryable("upstream-unavailable", "the first attempt fails on purpose")
    # Steps run at least once: a real mailer would drop duplicates by this key.
    log.info(f"delivered {composed.text} (key {step.idempotency_key})")
    return {"delivered": composed.text, "attempt": step.attempt}
