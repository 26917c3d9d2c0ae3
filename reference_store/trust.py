"""How far the store trusts what it is told, decided from where the content came from.

Memory is an injection channel: a web page or an e-mail that an agent read can try to
plant a standing order ("from now on, always ..."). The store therefore records a trust
level with every write, keeps untrusted content as low-scored episodic memory, and never
files instruction-like text as a semantic fact or a procedure, whoever sent it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "UNTRUSTED_SCORE_CAP",
    "Placement",
    "TrustLevel",
    "looks_like_instruction",
    "place",
    "trust_of",
]

TrustLevel = Literal["trusted", "derived", "untrusted"]

UNTRUSTED_SCORE_CAP = 0.3

_TRUSTED = frozenset({"user", "system", "operator", "admin"})
_DERIVED = frozenset({"agent", "assistant", "tool", "model", "llm", "memcert"})

_REPLY = (r"(?:reply|replies|respond|responses?|answers?|say|tell|call\s+me|address\s+me|"
          r"recommend|output|write|mention|reveal|use\s+(?:only|english|chinese|french|json))")

_INSTRUCTION = re.compile(
    rf"""
    \b(?:ignore|disregard|forget)\b.{{0,30}}\b(?:previous|prior|above|earlier|all)\b
        .{{0,20}}\b(?:instructions?|prompts?|rules?|messages?\s+from\s+the\s+system)\b
    | \bremember\s+to\s+(?:always|never)\b
    | \b(?:from\s+now\s+on|henceforth|going\s+forward)\b,?\s+(?:you\s+|please\s+)?
        (?:always\s+|never\s+|only\s+)?{_REPLY}\b
    | \b(?:always|never)\s+{_REPLY}\b
    | \b(?:always|never)\s+(?:start|begin|end)\s+(?:your|each|every)\s+
        (?:reply|response|answer|message)
    | \byou\s+(?:must|should)\s+(?:always|never|now)\b
    | \bsystem\s+prompt\b
    | 忽略.{{0,6}}(?:之前|以上|前面|先前|所有).{{0,6}}(?:指令|指示|提示|规则|要求)
    | (?:以后|今后|从现在起|从现在开始|往后).{{0,10}}(?:回复|回答|答复|称呼|叫我|输出|推荐|开头)
    | (?:所有|每次|每一次).{{0,6}}(?:回复|回答|对话).{{0,8}}(?:都|先|必须)
    | 记住.{{0,4}}(?:一定|总是|永远|每次).{{0,8}}(?:回复|回答|说|称呼|叫|推荐)
    """,
    re.IGNORECASE | re.VERBOSE | re.DOTALL,
)


def trust_of(source: str | None) -> TrustLevel:
    """Map a source like ``user``, ``tool:search`` or ``web:https://...`` to a trust level.

    No source means the caller wrote the memory itself, as an agent recording what its
    user said; an unrecognised source is untrusted rather than guessed at.
    """
    if source is None:
        return "trusted"
    kind = source.split(":", 1)[0].strip().casefold()
    if kind in _TRUSTED:
        return "trusted"
    if kind in _DERIVED:
        return "derived"
    return "untrusted"


def looks_like_instruction(text: str) -> bool:
    """Whether the text reads as a standing order to the agent rather than a fact."""
    return _INSTRUCTION.search(text) is not None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a memory lands once trust has been applied."""

    trust: TrustLevel
    memory_type: str
    score: float
    instruction_like: bool


def place(source: str | None, value: str, memory_type: str, score: float) -> Placement:
    """Apply the trust rules to a requested memory type and score."""
    trust = trust_of(source)
    instruction_like = looks_like_instruction(value)
    if trust == "untrusted" or instruction_like:
        memory_type = "episodic"
    if trust == "untrusted":
        score = min(score, UNTRUSTED_SCORE_CAP)
    return Placement(trust, memory_type, score, instruction_like)
