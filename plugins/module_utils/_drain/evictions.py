# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What a refused eviction means (pure): the message Cluster API records for
it (docs/behaviour.md §3.3), which the progress message and the result show."""

from __future__ import annotations

NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
# The eviction API's causes of a budget's refusal. ``DisruptionBudget`` is on every one (429, and the 403s of
# Kubernetes up to v1.37.2); a server that types its 403s says which it is (announced for Kubernetes 1.37):
BUDGET_CAUSE = "DisruptionBudget"
NEGATIVE_ALLOWED_CAUSE = "DisruptionBudgetNegativeAllowedDisruptions"
TOO_MANY_DISRUPTED_CAUSE = "DisruptionBudgetTooManyDisruptedPods"
# Their words where the server does not type them (a 403 with the DisruptionBudget cause).
_UNTYPED_403 = {"pdb disruptions allowed is negative": NEGATIVE_ALLOWED_CAUSE, "too many pending evictions": TOO_MANY_DISRUPTED_CAUSE}
TERMINATING_NAMESPACE_MESSAGE = "Cannot evict pod from terminating namespace: unable to create eviction (kube-controller-manager should set deletionTimestamp)"


def eviction_failure_message(status: int, message: str, causes: list[str] | list[dict] | None = None, namespace_terminating: bool = False) -> str | None:
    """What Cluster API records for a failed eviction; None when the Pod is gone (404 is success).

    ``causes`` are the Status ``details.causes`` (messages, or the cause dicts
    themselves, in which case a ``NamespaceTerminating`` cause is recognised);
    pass None when the Status had no ``details``. On 429 (PodDisruptionBudget)
    the cause messages are appended after a space, joined by "," as upstream
    does. A 403 in a terminating namespace gets the fixed docs/behaviour.md §3.3 text.
    """
    if status == 404:
        return None
    cause_messages, cause_types = [], set()
    for cause in causes or []:
        if isinstance(cause, dict):
            cause_messages.append(str(cause.get("message") or ""))
            cause_types.add(cause.get("type") or cause.get("reason"))
        else:
            cause_messages.append(str(cause))
    if status == 429:
        if causes is None:
            return message
        return f"{message} {','.join(cause_messages)}"
    if status == 403 and (namespace_terminating or NAMESPACE_TERMINATING_CAUSE in cause_types):
        return TERMINATING_NAMESPACE_MESSAGE
    return message or f"eviction failed with HTTP status {status}"


def budget_cause(status: int, message: str, causes: list[dict] | None) -> str | None:
    """Which budget refusal an eviction's failure is: ``DisruptionBudget`` (a 429: the budget allows none now),
    ``DisruptionBudgetNegativeAllowedDisruptions`` or ``DisruptionBudgetTooManyDisruptedPods`` (403s); None when
    a budget did not refuse it. The cause's type is read where the server sends it, the words only where it does not."""
    kinds = {str(cause.get("type") or cause.get("reason") or "") for cause in causes or [] if isinstance(cause, dict)}
    for typed in (NEGATIVE_ALLOWED_CAUSE, TOO_MANY_DISRUPTED_CAUSE):
        if typed in kinds:
            return typed
    if status == 429:
        return BUDGET_CAUSE
    if status == 403 and BUDGET_CAUSE in kinds:
        words = " ".join([message, *(str(cause.get("message") or "") for cause in causes or [] if isinstance(cause, dict))])
        return next((typed for text, typed in _UNTYPED_403.items() if text in words), BUDGET_CAUSE)
    return None
