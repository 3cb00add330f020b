"""Static checks the registry runs at the end of `build_definition` (see dexcli.sdk.registry).

Errors make registration fail (a goTo target that is not a registered step); warnings are kept
on the definition (unreachable steps). Source that cannot be read gives no findings.
"""

from __future__ import annotations

from typing import Any


def static_problems(definition: Any) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a FlowDefinition whose other checks passed. Never raises."""
    try:
        from dexcli.graph.model import analyze

        steps = [(spec.step_type, spec.instance) for spec in definition.steps.values()]
        start_spec = getattr(definition, "start_step", None)
        start = start_spec.instance if start_spec is not None else None
        analysis = analyze(definition.flow_type, steps, start)
    except Exception:  # a bug here must never stop a flow from registering
        return [], []
    errors = [p.message for p in analysis.problems if p.severity == "error"]
    warnings = [p.message for p in analysis.problems if p.severity == "warning"]
    return errors, warnings
