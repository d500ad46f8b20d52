"""Shell commands in tool calls: the command line a call runs, and the files it reads or modifies.

Agents run shell commands through a tool (Claude Code's ``Bash``, Codex's ``shell`` /
``exec_command``, many ``run_command``s): ``command_line`` finds the line in the arguments — a
``command`` or ``cmd`` string, or an argv list (``["bash", "-lc", "cat a.py"]`` gives the script
``cat a.py``; any other list is joined with shell quoting).

``shell_file_ops`` reads a command line by its words, the way a reviewer skims it, not the way a
shell runs it: files read are the operands of ``READERS`` (``cat``, ``head``, ``tail``, ``nl``,
``less``, ``more``, ``bat``, ``wc``, and ``sed`` without ``-i``), the files (or directories)
``grep`` / ``rg`` search, after their pattern, and ``<`` inputs; files modified
are ``>`` / ``>>`` targets, ``tee`` operands, ``touch`` / ``rm`` operands, ``sed -i`` operands,
both operands of ``mv`` and the last of ``cp`` (whose others are read), and the files an
``apply_patch`` envelope names (``*** Update File: x``) anywhere in the line. Options are
skipped, with the value of the few that take one (``head -n 20``). Anything it cannot read (an
unbalanced quote) names no file, nor do variables (``$f``) and globs (``*.py``); a heredoc's body
is not read as commands. Pure; never raises.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any, Final, Literal

__all__ = ["COMMAND_KEYS", "command_line", "patch_files", "shell_file_ops"]

Op = Literal["read", "modified"]

COMMAND_KEYS: Final = ("command", "cmd")
SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish", "pwsh", "powershell", "cmd", "cmd.exe"})
SCRIPT_FLAGS: Final = frozenset({"-c", "-lc", "-ic", "-lic", "/c", "-command", "-Command"})
READERS: Final = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "wc", "sed"})
SEARCHERS: Final = frozenset({"grep", "egrep", "fgrep", "rg"})  # a pattern, then the files searched
WRITERS: Final = frozenset({"touch", "rm", "tee", "mv", "cp"})
# The options of a program that take the next word as their value.
_COUNTS: Final = frozenset({"-n", "-c", "--lines", "--bytes"})
_SEARCH: Final = frozenset({"-e", "-f", "-m", "-A", "-B", "-C", "-g", "-t", "-T", "--regexp", "--file", "--glob"})
VALUE_OPTIONS: Final[Mapping[str, frozenset[str]]] = {
    "head": _COUNTS,
    "tail": _COUNTS,
    "sed": frozenset({"-e", "-f", "-l", "--expression", "--file", "--line-length"}),
    **dict.fromkeys(SEARCHERS, _SEARCH),
}
# Options after which every operand is a file: the script or pattern came with the option.
SCRIPT_OPTIONS: Final = frozenset({"-e", "-f", "--expression", "--file", "--regexp"})
_CONTROL: Final = frozenset({";", "&&", "||", "|", "&", "(", ")", "|&", ";;"})
_REDIRECTS: Final = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<", "<&"})
_PATCH_FILE: Final = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M)
_NOT_FILES: Final = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "-", ".", ".."})
_NOT_A_NAME: Final = re.compile(r"^\$|[*?\n]")  # a variable, a glob, a multi-line word


def command_line(arguments: Mapping[str, Any]) -> str | None:
    """The shell command line a call's arguments carry, or None."""
    for key in COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, list) and value and all(isinstance(word, str) for word in value):
            program = value[0].rsplit("/", 1)[-1].casefold()
            if len(value) >= 3 and program in SHELLS and value[-2] in SCRIPT_FLAGS:
                return value[-1].strip() or None
            return shlex.join(value)
    return None


def patch_files(text: str) -> list[str]:
    """The files an ``apply_patch`` envelope in ``text`` names, in order."""
    if "*** " not in text:
        return []
    return [a or b for a, b in _PATCH_FILE.findall(text)]


def _words(line: str) -> list[str]:
    first = line.split("<<", 1)[0] if "<<" in line else line  # not a heredoc's body
    lexer = shlex.shlex(first, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return []


def _commands(words: list[str]) -> list[tuple[list[str], list[tuple[Op, str]]]]:
    """Simple commands (their words) and the redirections of each."""
    commands: list[tuple[list[str], list[tuple[Op, str]]]] = [([], [])]
    i = 0
    while i < len(words):
        word = words[i]
        if word in _CONTROL:
            commands.append(([], []))
        elif word in _REDIRECTS:
            target = words[i + 1] if i + 1 < len(words) else ""
            if word != "<&" and target and not target.isdigit():
                commands[-1][1].append(("read" if word == "<" else "modified", target))
            words_so_far = commands[-1][0]
            if words_so_far and words_so_far[-1].isdigit():  # "2>": a descriptor, not an operand
                words_so_far.pop()
            i += 1
        else:
            commands[-1][0].append(word)
        i += 1
    return commands


def _operands(words: list[str], valued: frozenset[str]) -> tuple[list[str], set[str]]:
    """A command's operands and its options (``--`` ends the options; ``valued`` take a value)."""
    operands: list[str] = []
    options: set[str] = set()
    i, ended = 1, False
    while i < len(words):
        word = words[i]
        if not ended and word == "--":
            ended = True
        elif not ended and word.startswith("-") and word != "-":
            options.add(word)
            i += 1 if word in valued else 0
        else:
            operands.append(word)
        i += 1
    return operands, options


def _ops_of(words: list[str]) -> list[tuple[Op, str]]:
    program = words[0].rsplit("/", 1)[-1]
    if program not in READERS and program not in SEARCHERS and program not in WRITERS:
        return []
    operands, options = _operands(words, VALUE_OPTIONS.get(program, frozenset()))
    if program == "sed" or program in SEARCHERS:
        in_place = program == "sed" and any(option.startswith(("-i", "--in-place")) for option in options)
        files = operands if options & SCRIPT_OPTIONS else operands[1:]
        return [("modified" if in_place else "read", name) for name in files]
    if program in READERS:
        return [("read", name) for name in operands]
    if program == "cp" and len(operands) >= 2:
        return [*(("read", name) for name in operands[:-1]), ("modified", operands[-1])]
    return [("modified", name) for name in operands]


def shell_file_ops(line: str) -> list[tuple[Op, str]]:
    """``(op, path)`` for each file ``line`` reads or modifies, in order (see the module)."""
    found: list[tuple[Op, str]] = [("modified", name) for name in patch_files(line)]
    if found:
        return found
    for words, redirections in _commands(_words(line)):
        if words:
            found += _ops_of(words)
        found += redirections
    return [(op, name) for op, name in found if name not in _NOT_FILES and not _NOT_A_NAME.search(name)]
