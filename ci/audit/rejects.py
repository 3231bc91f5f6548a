"""The audit's section on rejected inputs (seed 000 §5, "拒绝的输入"): every rule violation
of :data:`oracle.violations.VIOLATIONS` on the lab's inputs, where impl and the oracle must
raise the same error class with the same message."""

from __future__ import annotations

from attnprops.ci.audit.record import Audit
from attnprops.ci.audit.record import Check


def _raised(call) -> dict:
    try:
        call()
    except Exception as exc:  # recorded, whatever it is
        return {"error": type(exc).__name__, "message": str(exc)}
    return {"error": None, "message": "no error raised"}


def rejects(audit: Audit) -> None:
    """One ``"raises"`` check per fixed example of the rule-violation registry."""
    from attnprops import impl
    from attnprops import oracle
    from attnprops.oracle.violations import examples

    for example in examples():
        measured = {
            "impl": _raised(lambda: example.call.run(impl)),
            "oracle": _raised(lambda: example.call.run(oracle)),
        }
        error = example.error.__name__
        passed = (
            measured["impl"]["error"] == error
            and measured["oracle"]["error"] == error
            and measured["impl"]["message"] == measured["oracle"]["message"]
        )
        audit.add(
            Check(
                f"rejects.{example.id.replace('-', '_')}",
                "rejects",
                f"impl and oracle reject this input ({example.rule}: {example.id}) "
                f"with {error}, same message",
                "raises",
                {"error": error},
                measured,
                None,
                passed,
                "seed 000 §5 (拒绝的输入) and oracle/rules/",
            )
        )
