"""Removing secrets from commands, env values and output before anything is written.

What was removed is recorded as ``{"kind": ..., "where": ...}``, never the value itself.

Recognised, besides the runbook's ``redact`` values and the values of secret-named variables:

- ``NAME=value`` and ``NAME: value`` for secret-like names (``HF_TOKEN=…``, ``AccountKey=…``,
  ``aws_secret_access_key = …``), and YAML's ``password: the rest of the line``;
- quoted keys of JSON, Python dicts, YAML and Ruby/PHP hashes (``"password": "…"``,
  ``'api_key': '…'``, ``\\"token\\": \\"…\\"`` inside a JSON string, ``"pin_password": 1234``);
- flags: ``--password X``, ``--hf-token=X``, ``--api-key X``, and ``-pPASS`` on the MySQL and
  MariaDB clients' command lines;
- ``Authorization:`` and ``X-Api-Key:`` headers, a ``Bearer``/``Basic`` credential after
  ``Authorization`` and a long one after ``Bearer``; ``user:password@`` in URLs;
- private key blocks (each line between ``-----BEGIN … PRIVATE KEY-----`` and its END line;
  to the end when there is none), PuTTY key files' private lines;
- token shapes, after the detect-secrets project's list: Hugging Face, GitHub, GitLab, OpenAI,
  Slack tokens and webhooks, AWS key ids, Google API keys, Stripe, npm, PyPI, Twilio, SendGrid,
  Square, Mailchimp, Discord and Telegram bot tokens, Shopify, JWTs.

Evidence is never masked: the output of an upgrade is what the journal is for. What a
secret-like name or flag is followed by is left when it cannot be a secret *by its form*:

- ``==`` and ``::`` after a name compare or qualify, they do not assign: ``tiktoken==0.14.0``
  (pip freeze, uv's ``+ tiktoken==0.14.0``) is a requirement, as ``>=``, ``~=``, ``!=`` and
  ``<=`` already are (none is an assignment's ``=``);
- a version under a name that distributions have: a secret word that is no part of an
  identifier on its own, being glued to the word before it or after a ``-`` or ``.``
  (``tiktoken``, ``oauth``, ``google-auth``, ``eks-token``), followed by a PEP 440 version
  with a dot (``"tiktoken": "0.14.0"``, conda's ``tiktoken=0.14.0=pypi_0``). Where the word
  is an identifier's own part (``HF_TOKEN``, ``db_password``, ``sessionToken``, ``password``)
  every value is masked, a version's shape too, and a glued name's value that is no version
  is still masked (``authtoken: 2abc…``);
- a literal (``true``, ``false``, ``null``, ``None``: ``api_key=None,`` in a printed config),
  an object (``"tiktoken": {…}``: its members are judged by their own keys), and an unquoted
  number with a fraction after a quoted key (``"time_to_first_token": 35.2``: a measurement;
  a whole number, a PIN, is masked);
- a figure after a label of words (a word and a blank before the name on its line, then
  ``:``): a number with a fraction or a unit (``Time to first token: 35.2 ms``); a bare whole
  number there (``Your token: 123456``) is masked, as is anything after a one-word key;
- what follows a flag after a blank but is not its value: the next option (or ``-``), an
  English function word or a noun naming an option (``the --password flag is deprecated``,
  ``use --api-key to set it``), a placeholder (``<password>``, argparse's metavar: the flag's
  name in capitals, ``--api-key API_KEY``), a variable's reference (``--token $HF_TOKEN``).
  After ``=``, or quoted, it is the value, whatever it says.

Those exceptions hang on the whole of a value; where output still being printed may be cut
(:func:`~journal.redact.cuts.safe_cut`) the patterns are matched without them, so a cut never splits
what could still become a secret. Structured results (a probe's JSON, a parser's figures) are parsed
from the output as printed, then redacted field by field (:mod:`~journal.redact.structured`), never
redacted as text first: the names and versions of packages are data.

Secrets are found in what a terminal shows (:func:`~journal.redact.terminal.shown`: the escape
sequences of :data:`journal.terminal.ESCAPE` removed, as the detectors' clean view removes them;
each ``\r`` redraw read as a line of its own) and masked in the bytes as printed, however the
sequences interleave with them (``\x1b[32mghp_…\x1b[0m``, ``\x1b[33mpassword\x1b[0m: …``, a token
split by a colour code, ``jq -C``'s keys and values, ``grep --color`` splitting ``HF_TOKEN``): the
secret's characters are replaced, the sequences kept, so colours still render; the text of OSC and
DCS strings (a title, a hyperlink's address) is redacted on its own. A token shape follows any
character that cannot be part of it, a colour code's ``m`` and a letter glued before ``ghp_``
included; a letter before it counts only for prefixes that end ordinary words (``sk-``: ``task-``,
``disk-``; see :data:`journal.redact.shapes.SHAPES`).

Each pattern is led by a literal (a keyword, a token's prefix, a separator), so the regex engine
finds its candidates at memchr speed; case-insensitive ones are matched against the lowercased
bytes. Coloured output's view costs a few more passes at that speed, and a mask is put back
among the escape sequences of its own lines only (:mod:`~journal.redact.terminal`).
:meth:`Redactor.tail` and :meth:`Redactor.safe_cut` tell a recorder where output still being
printed may be cut without splitting a secret or an escape sequence (:mod:`journal.recorder`).

The package, one module a concept: :mod:`~journal.redact.redactor` (the :class:`Redactor`),
:mod:`~journal.redact.spans` (what a pattern is and masks), the patterns by what gives a secret
away (:mod:`~journal.redact.names`, :mod:`~journal.redact.keys`, :mod:`~journal.redact.flags`,
:mod:`~journal.redact.shapes`; in order in :mod:`~journal.redact.patterns`),
:mod:`~journal.redact.terminal` (what a terminal shows), :mod:`~journal.redact.cuts` (where
output being printed may be cut) and :mod:`~journal.redact.structured` (results field by field).
Its face is what the rest of journal uses: :class:`Redactor`, :data:`MASK` and
:func:`secret_value`.
"""

from __future__ import annotations

from journal.redact.names import secret_value
from journal.redact.redactor import Redactor
from journal.redact.spans import MASK

__all__ = ["MASK", "Redactor", "secret_value"]

