"""`journal notify test NAME`: send a sample notification to a ``[notify.NAME]`` webhook of the
runbook, to check the set-up; every attempt is recorded, as for any notification."""

from __future__ import annotations

import argparse
import sys

from journal.cli.context import Context, base_url_of
from journal.errors import BadInput


def test(ctx: Context, args: argparse.Namespace) -> int:
    from journal.runbook import suggest

    runbook = ctx.runbook
    base_url = base_url_of(args)
    spec = runbook.notify.get(args.name)
    if spec is None:
        known = list(runbook.notify)
        hint = (
            suggest(args.name, known)
            if known
            else (
                ': the runbook has no [notify.NAME] table (url = "https://…", format = "slack", '
                'on = ["step-failed"])'
            )
        )
        raise BadInput(f"{runbook.path}: no notification channel named {args.name!r}{hint}")
    if spec.url is None:
        raise BadInput(
            f"{runbook.path}, notify.{spec.name}.url_env: the environment variable "
            f"{spec.url_env} is not set (or empty), so there is no webhook to send to; export "
            "it in the environment journal runs in"
        )
    from journal.events import NotificationSent
    from journal.notify import Webhooks
    from journal.notify.notices import sample_notice
    from journal.notify.sender import Sender
    from journal.service.steps import ensure_opened

    store = ctx.store
    ensure_opened(store, runbook)
    attempts: list[NotificationSent] = []

    def record(event: NotificationSent) -> None:
        store.append(runbook.name, [event])
        attempts.append(event)

    sender = Sender(record)
    hooks = Webhooks(store, runbook, base_url, sender)
    hooks.specs = [spec]
    hooks.tell(sample_notice(runbook.name, spec.name, hooks.base_url))
    sender.close(sender.attempts * (sender.timeout_s + sender.backoff_s * 2**sender.attempts))
    for event in attempts:
        said = (
            f"delivered (HTTP {event.status})"
            if event.delivered
            else f"not delivered: {event.reason}"
        )
        print(
            f"journal: [notify.{spec.name}] {event.url} ({event.format}), attempt "
            f"{event.attempt} of {event.attempts}: {said} in {event.seconds:.2f} s",
            file=sys.stderr,
        )
    return 0 if attempts and attempts[-1].delivered else 1
