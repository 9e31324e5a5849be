"""What a notification says: a :class:`Notice` (what happened, where, a link), and the two
bodies it is posted as: journal's own JSON (:func:`as_json`, its keys listed in docs/operations.md)
and Slack's ``{"text", "blocks"}`` (:func:`as_slack`).

A notice never carries a step's output: only the facts a reader needs to decide whether to
look (journal, host, step, exit status, the finding's title and advice, the figure and its
change) and the link to the web UI's page that has the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The version of the JSON body's keys.
SCHEMA = 1
#: Slack's limit on a section block's text.
SLACK_TEXT = 3000


@dataclass(frozen=True)
class Notice:
    """One thing to tell: ``trigger`` (``step-failed``, ``finding``, ``plan-finished``,
    ``drift``, ``rollback``, ``test``), a one-line ``text``, and the facts about it."""

    trigger: str
    journal: str
    text: str
    host: str | None = None
    step: str | None = None
    run: str | None = None
    status: str | None = None
    exit_code: int | None = None
    duration: float | None = None
    reason: str | None = None
    #: a finding: ``id``, ``key``, ``severity``, ``title``, ``advice`` (and ``figure``:
    #: ``before``, ``after``, ``change_percent`` for a throughput finding)
    finding: dict[str, Any] | None = None
    #: a finished plan: ``status``, ``exit_status``, ``steps``, ``hosts``, ``failed``
    plan: dict[str, Any] | None = None
    #: hosts that drifted: ``groups``, ``lines`` (one sentence per divergence)
    drift: dict[str, Any] | None = None
    #: a rollback run's target: ``to``, ``run``, ``phase``, ``packages`` (a count)
    rollback: dict[str, Any] | None = None
    #: a rollout stopped by its gate: ``rollout``, ``status``, ``batch``, ``reason``,
    #: ``drained``, ``untouched``
    gate: dict[str, Any] | None = None
    #: the web UI's page of the run (``--base-url`` / ``[journal] base_url``), else None
    url: str | None = None
    #: which one this is, for the record: a finding's key, a plan run, a run
    subject: str | None = None
    severity: str | None = None
    fields: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def as_json(notice: Notice, at: str) -> dict[str, Any]:
    """journal's own body: every key always there (null where it does not apply)."""
    return {
        "schema": SCHEMA,
        "event": notice.trigger,
        "journal": notice.journal,
        "at": at,
        "text": notice.text,
        "host": notice.host,
        "step": notice.step,
        "run": notice.run,
        "status": notice.status,
        "exit_code": notice.exit_code,
        "duration": notice.duration,
        "reason": notice.reason,
        "finding": notice.finding,
        "plan": notice.plan,
        "drift": notice.drift,
        "rollback": notice.rollback,
        "gate": notice.gate,
        "url": notice.url,
    }


_ICON = {
    "step-failed": ":x:",
    "finding": ":warning:",
    "plan-finished": ":checkered_flag:",
    "drift": ":twisted_rightwards_arrows:",
    "rollback": ":rewind:",
    "gate-failed": ":octagonal_sign:",
    "test": ":wave:",
}


def as_slack(notice: Notice, at: str) -> dict[str, Any]:
    """Slack's incoming-webhook body: ``text`` (the notification's one line, what a phone
    shows) and ``blocks``: the line, the facts as fields, the finding's advice, the link."""
    icon = _ICON.get(notice.trigger, "")
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(f"{icon} {notice.text}")}}
    ]
    facts = [("journal", notice.journal)]
    facts += [(k, v) for k, v in (("host", notice.host), ("step", notice.step)) if v]
    if notice.exit_code is not None:
        facts.append(("exit status", str(notice.exit_code)))
    if notice.duration is not None:
        facts.append(("duration", f"{notice.duration:.2f} s"))
    facts += list(notice.fields)
    blocks.append(
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": _clip(f"*{name}*\n{value}", 2000)}
                for name, value in facts[:10]
            ],
        }
    )
    if notice.finding and notice.finding.get("advice"):
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": _clip(f"*advice:* {notice.finding['advice']}")},
            }
        )
    if notice.drift and notice.drift.get("lines"):
        lines = "\n".join(f"• {line}" for line in notice.drift["lines"][:20])
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip(lines)}})
    context = f"journal · {at}"
    if notice.url:
        context = f"<{notice.url}|open in journal> · {at}"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    text = notice.text if not notice.url else f"{notice.text} {notice.url}"
    return {"text": _clip(text), "blocks": blocks}


def body(notice: Notice, fmt: str, at: str) -> dict[str, Any]:
    """The body ``fmt`` (``slack`` or ``json``) posts."""
    return as_slack(notice, at) if fmt == "slack" else as_json(notice, at)


def _clip(text: str, limit: int = SLACK_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
