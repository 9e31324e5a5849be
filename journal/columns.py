"""Long lists held in columns: a year's journal lists a hundred thousand runs or findings, and
a Python object each costs 60 to 200 bytes where their text costs twenty."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator


class Texts:
    """Strings held one after another as UTF-8, each read back as it was appended."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._text = bytearray()
        self._ends = array("q")  # where each ends in ``_text``
        for text in texts:
            self.append(text)

    def append(self, text: str) -> None:
        self._text += text.encode()
        self._ends.append(len(self._text))

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, index: int) -> str:
        if index < 0:
            index += len(self._ends)
        begin = self._ends[index - 1] if index else 0
        return self._text[begin : self._ends[index]].decode()

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))
