"""Static checks over the steps' source, for `Registry(checks=static_problems)`.

The registry runs them at the end of `build_definition`, once its own checks passed. Errors make
registration fail (a goTo target that is not a registered step); warnings are kept on the
definition (unreachable steps). Source that cannot be read or parsed gives no findings (dexcli.graph.static
catches those failures where it reads the source); any other exception is a bug and propagates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dexcli.graph.model import analyze

if TYPE_CHECKING:
    from dexcli.sdk.registry import FlowDefinition


def static_problems(definition: FlowDefinition) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a FlowDefinition whose other checks passed."""
    steps = [(spec.step_type, spec.instance) for spec in definition.steps.values()]
    start = definition.start_step.instance if definition.start_step is not None else None
    analysis = analyze(definition.flow_type, steps, start)
    errors = [p.message for p in analysis.problems if p.severity == "error"]
    warnings = [p.message for p in analysis.problems if p.severity == "warning"]
    return errors, warnings
