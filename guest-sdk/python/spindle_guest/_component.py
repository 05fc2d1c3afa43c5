"""The component glue: the class componentize-py calls for the exported `kind` interface.

componentize-py imports an app module at build time and instantiates the class named
after the exported interface, `Kind`, in it. `spindle_guest.build` writes that module:

    from spindle_guest._component import export
    Kind = export("greet:kind")

`export` finds the kind, checks that it describes itself, installs the host over the
bindings, and returns a class delegating each export to the kind. The import runs (and
is snapshotted) at build time, so a kind that cannot describe itself fails the build,
not the deploy.
"""

from __future__ import annotations

import importlib
import sys
import traceback
import types
from typing import Union

from wit_world import exports
from wit_world.imports import spindle_job_types as wit

from . import _host, _wasm
from .errors import uncaught
from .kind import Kind


def resolve(target: Union[str, types.ModuleType, Kind]) -> Kind:
    """The kind `target` names: a `Kind`, a module holding exactly one, or `module[:attribute]`."""
    if isinstance(target, Kind):
        return target
    attribute = None
    if isinstance(target, str):
        name, _, attribute = target.partition(":")
        target = importlib.import_module(name)
    if attribute:
        found = getattr(target, attribute, None)
        if not isinstance(found, Kind):
            raise TypeError(f"`{target.__name__}.{attribute}` is not a spindle_guest.Kind")
        return found
    kinds = [value for value in vars(target).values() if isinstance(value, Kind)]
    if len(kinds) != 1:
        found_names = ", ".join(k.name for k in kinds) or "none"
        raise TypeError(
            f"module `{target.__name__}` must hold exactly one spindle_guest.Kind (found {found_names}); "
            "name the one to export as `module:attribute`"
        )
    return kinds[0]


def _bug(error: BaseException) -> wit.StepOutcome:
    """An error outside the kind's code (converting its outcome, say) still reports, rather
    than trapping the call with no code or message."""
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    sys.stderr.flush()
    failure = uncaught(error)
    return wit.StepOutcome_Retryable(wit.Failure(failure.code, failure.message))


def export(target: Union[str, types.ModuleType, Kind]) -> type:
    """The class implementing the exported `kind` interface for the kind `target` names."""
    kind = resolve(target)
    kind.spec()
    _host.install(_wasm.WasmHost())

    class KindExport(exports.Kind):
        """Delegates each export to the kind, converting to and from the WIT types."""

        def describe(self) -> wit.KindSpec:
            return _wasm.kind_spec(kind.spec())

        def run_step(self, input: wit.StepInput) -> wit.StepOutcome:
            try:
                return _wasm.outcome(kind.run_step(_wasm.step(input)))
            except BaseException as error:  # noqa: BLE001 - a trap would say nothing at all
                return _bug(error)

        def on_failure(self, job: wit.JobSummary) -> None:
            _wasm.hook_result(kind.run_on_failure(_wasm.job_summary(job)))

        def on_success(self, job: wit.JobSummary) -> None:
            _wasm.hook_result(kind.run_on_success(_wasm.job_summary(job)))

    KindExport.__name__ = KindExport.__qualname__ = "Kind"
    return KindExport

