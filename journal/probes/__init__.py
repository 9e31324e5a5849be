"""Probes: small programs run on a host after a step to record what is really there.

Built-in probes are Python scripts under ``journal/probes/scripts/`` shipped to the host and
run by the host's *target* python (the env being upgraded): ``packages`` and ``torch-env``.
A runbook adds its own as ``[probes.NAME]`` with a shell ``run`` and either ``json = true``
(the command prints one JSON object) or ``capture = { field = "regex with one group" }``;
:mod:`journal.runbook.probes` reads those tables into the :class:`ProbeSpec` defined here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from journal.userregex import UserRegex

#: The built-in probes: name -> the script under scripts/ that the target python runs.
BUILTIN: dict[str, str] = {"packages": "packages.py", "torch-env": "torch_env.py"}
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class ProbeSpec:
    """How to run one probe and read its result."""

    name: str
    script: str | None = None
    run: str | None = None
    json: bool = False
    capture: dict[str, UserRegex] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT_S
    args: tuple[str, ...] = ()

    @property
    def builtin(self) -> bool:
        return self.script is not None

    def command(self, python: str) -> str:
        """The shell command that runs this probe on a host whose target python is ``python``."""
        import shlex

        if self.script is None:
            assert self.run is not None
            return self.run
        source = resources.files("journal.probes.scripts").joinpath(self.script).read_text()
        # The python path stays unquoted so that ~ expands on the host.
        return " ".join([python, "-c", shlex.quote(source), *map(shlex.quote, self.args)])
