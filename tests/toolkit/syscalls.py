"""Test helpers: system calls that do less than asked, as a signal or a nearly full disk makes them."""

from __future__ import annotations

import os


def short_writev(monkeypatch, most: int = 777) -> list[int]:
    """Make ``os.writev`` write at most ``most`` bytes of its first buffer a call (as it may); returns the
    list into which each call's number of buffers goes."""
    real = os.writev
    asked: list[int] = []

    def writev(fd, buffers):
        asked.append(len(buffers))
        return real(fd, [bytes(buffers[0])[:most]])

    monkeypatch.setattr(os, "writev", writev)
    return asked
