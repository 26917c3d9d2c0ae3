"""The rule-based state machine that drives a backend and judges it with the checkers.

Each program Hypothesis runs starts from an empty store (``reset()``), sends writes,
deletes, restores and reads through the contract, and records every operation in a
history exactly as the chaos runner does (invoke, then ok / fail / info). The shared
:class:`~invariants.checkers.CheckerSuite` observes that history as it grows. Every step
ends by reading every entity back (the checkers judge reads) and asking whether the
checkers the machine was told to judge by found a new violation; if so, it raises. The
machine holds no definition of any invariant; its oracle
(:mod:`invariants._stateful_model`) only steers what it tries.

Raising at the step that shows the violation is what lets Hypothesis shrink a failure
to a short program, and lets the printed program fail at that same step when run.
"""

from __future__ import annotations

import collections
import functools
import itertools
import re
import textwrap
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, NoReturn, TypeAlias, TypeVar

from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context, event
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    multiple,
    precondition,
    rule,
)

from invariants.backend import (
    Ack,
    BackendFactory,
    Delete,
    MemoryBackend,
    Record,
    Restore,
    Write,
    send,
)
from invariants.checkers import CHECKER_NAMES, CheckerSuite
from invariants.display import quote
from invariants.history import HistoryRecorder, Read, WriteMeta, describe_error
from invariants.levels import CLAIMABLE_LEVELS, ClaimableLevel, Paraphrase
from invariants.verdict import (
    NAME_WIDTH,
    VALUE_WIDTH,
    CheckResult,
    Validity,
    Violation,
    render_explanation,
)
from invariants.wording.values import DEFAULT_VALUE_BYTES, TEXT_CLASSES

from ._stateful_model import ContractModel
from ._stateful_words import (
    MACHINE_SLOTS,
    OBJECTS,
    PAYLOAD_SIZES,
    TWINS,
    Attribute,
    FactWording,
    Payload,
    attribute_variant,
    fact,
    reworded,
    twin,
)

__all__ = [
    "ENTITIES",
    "VIOLATED",
    "BackendMachine",
    "CausalMonotonicityViolated",
    "DeletionMonotonicityViolated",
    "DurabilityViolated",
    "Entity",
    "HandlePool",
    "InvariantViolated",
    "IsolationViolated",
    "MachineConfig",
    "PhantomViolated",
    "RunTally",
    "SemanticNormalizationViolated",
    "UniquenessViolated",
]

T = TypeVar("T")

MAIN = 0
"""The worker id of the machine's own sequential steps; burst threads count from 1."""


class InvariantViolated(AssertionError):
    """A checker found a violation in the machine's history at the step just run.

    ``checkers`` are the checkers that found one at that step, ``violations`` the
    violations themselves, as data, and ``explanations`` each one rendered, prefixed by
    its checker's name; ``found`` pairs each violation with its checker. ``concurrent``
    says that operations of the program raced, so that another run of it may interleave
    them otherwise. Each checker has its own subclass, so Hypothesis tells the bugs of
    two invariants apart and shrinks each on its own.
    """

    checker: ClassVar[str] = ""
    __module__ = "invariants.stateful"

    def __init__(
        self,
        found: tuple[tuple[str, Violation], ...] = (),
        *,
        concurrent: bool = False,
    ) -> None:
        self.concurrent = concurrent
        self.found = found
        self.checkers = tuple(dict.fromkeys(name for name, _ in found))
        self.violations = tuple(v for _, v in found)
        self.explanations = tuple(f"{name}: {render_explanation(v)}" for name, v in found)
        super().__init__("\n\n".join(self.explanations))


class UniquenessViolated(InvariantViolated):
    __module__ = "invariants.stateful"
    checker = "uniqueness"


class CausalMonotonicityViolated(InvariantViolated):
    __module__ = "invariants.stateful"
    checker = "causal_monotonicity"


class DeletionMonotonicityViolated(InvariantViolated):
    __module__ = "invariants.stateful"
    checker = "deletion_monotonicity"


class SemanticNormalizationViolated(InvariantViolated):
    __module__ = "invariants.stateful"
    checker = "semantic_normalization"


class DurabilityViolated(InvariantViolated):
    __module__ = "invariants.stateful"
    checker = "durability"


class IsolationViolated(InvariantViolated):
    __module__ = "invariants.stateful"
    checker = "isolation"


class PhantomViolated(InvariantViolated):
    __module__ = "invariants.stateful"
    checker = "phantom"


VIOLATED: Mapping[str, type[InvariantViolated]] = {
    cls.checker: cls
    for cls in (
        UniquenessViolated,
        CausalMonotonicityViolated,
        DeletionMonotonicityViolated,
        SemanticNormalizationViolated,
        DurabilityViolated,
        IsolationViolated,
        PhantomViolated,
    )
}
"""Checker name -> the exception the machine raises for it."""


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity of one namespace; ``tag`` ends every text written to it."""

    namespace: str
    entity_id: str
    tag: str


ENTITIES: tuple[Entity, ...] = (
    Entity("tenant_a", "alice", "a"), Entity("tenant_b", "alice", "b"),
)
"""One entity id in two namespaces, so that a read can leak the other namespace's
records; two entities only, so that operations meet on one entity often."""

REASONS: tuple[str | None, ...] = ("user request", "retention policy", None)
"""A delete's ``reason``, which the contract makes optional."""

BEFORE_DELETE = "before delete"
"""A lag that puts a write's causal_seq just below its entity's last delete: a write
issued before the delete, arriving after it, and after a restore too."""

Lag: TypeAlias = int | str
LAGS: st.SearchStrategy[Lag] = st.sampled_from((0, 0, 1, 3, 10, BEFORE_DELETE))
"""How many operations ago an operation drew its causal_seq: mostly just now."""

CANONICAL: Mapping[str, Attribute] = {slot: Attribute(slot, slot, "none") for slot in MACHINE_SLOTS}
"""Each slot's canonical attribute name."""

BurstOp: TypeAlias = FactWording | str
"""A burst step: a wording to write, or ``"read"``, or ``"delete"``."""


class HandlePool:
    """Backend handles by worker id, made on first use and kept across programs.

    Opening a handle can cost a connection pool and a schema check, so one run of many
    programs opens one per worker, not one per program. A worker's handle is only ever
    used by that worker's thread, as the contract asks.
    """

    def __init__(self, factory: BackendFactory) -> None:
        self._factory = factory
        self._handles: dict[int, MemoryBackend] = {}
        self._lock = threading.Lock()

    def get(self, worker: int) -> MemoryBackend:
        with self._lock:
            handle = self._handles.get(worker)
            if handle is None:
                handle = self._handles[worker] = self._factory()
            return handle

    def close(self) -> None:
        with self._lock:
            handles = list(self._handles.values())
            self._handles.clear()
        for handle in handles:
            handle.close()


class RunTally:
    """What every program of one run saw, summed: the run's coverage.

    ``decisions`` counts what the oracle expected of the operations sent (``write
    stale``, ``restore applied``, ...): which of the contract's cases the run exercised.
    A checker that never had anything to check in any program, or that crashed,
    cannot be said to have passed; :meth:`undecided` says which and why.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.programs = 0
        self.decisions: collections.Counter[str] = collections.Counter()
        self.checked: dict[str, int] = dict.fromkeys(CHECKER_NAMES, 0)
        self.restore_supported = True
        self._idle: dict[str, str] = {}
        self._crashed: dict[str, str] = {}

    def started(self) -> None:
        with self._lock:
            self.programs += 1

    def decided(self, label: str) -> None:
        with self._lock:
            self.decisions[label] += 1

    def add(self, results: Mapping[str, CheckResult]) -> None:
        with self._lock:
            for name, result in results.items():
                self.checked[name] += result.checked
                if result.validity is Validity.UNKNOWN:
                    notes = "; ".join(result.notes)
                    if result.checked:
                        self._crashed.setdefault(name, notes)
                    else:
                        self._idle[name] = notes

    def undecided(self, checkers: tuple[str, ...]) -> dict[str, str]:
        """Checker -> why it cannot be decided, for those of ``checkers`` that cannot."""
        reasons: dict[str, str] = {}
        for name in checkers:
            if name in self._crashed:
                reasons[name] = self._crashed[name]
            elif not self.checked[name]:
                reasons[name] = self._idle.get(name, "no program ran")
        return reasons


@dataclass(frozen=True)
class MachineConfig:
    """Everything a machine needs; programs of one run share the pool and the tally.

    ``level`` is the normalization level the backend claims: paraphrases go up to it
    and the semantic normalization checker judges at it. ``checkers`` are the ones
    whose violations fail a program (all of them run). ``restore`` and ``concurrency``
    say whether restores and concurrent bursts are generated; a printed program calls
    its steps directly, whatever these say. ``echo`` prints each step as it runs: the
    operations sent, as the backend received them, with its answers, and at the step
    that shows a violation, the explanation; a printed program turns it on, a search
    leaves it off. ``max_value_bytes`` bounds the payloads' values, as certify's
    ``--max-value-bytes`` bounds the scenarios'.
    """

    factory: BackendFactory
    level: ClaimableLevel = "lexical"
    checkers: tuple[str, ...] = CHECKER_NAMES
    restore: bool = True
    concurrency: bool = True
    pool: HandlePool | None = None
    tally: RunTally = field(default_factory=RunTally)
    echo: bool = False
    max_value_bytes: int = DEFAULT_VALUE_BYTES

    @property
    def paraphrase_levels(self) -> tuple[ClaimableLevel, ...]:
        return CLAIMABLE_LEVELS[: CLAIMABLE_LEVELS.index(self.level) + 1]

    @property
    def spelling_levels(self) -> tuple[ClaimableLevel, ...]:
        return tuple(lvl for lvl in self.paraphrase_levels if lvl != "semantic")

    @property
    def thread_counts(self) -> st.SearchStrategy[int]:
        """Threads a burst may use: one (a batch in order), or two or three racing."""
        return _one_of((1, 2, 3) if self.concurrency else (1,))


@functools.cache
def _one_of(values: tuple[T, ...]) -> st.SearchStrategy[T]:
    """One strategy object per set of choices: Hypothesis validates each new strategy
    it meets, which would otherwise happen at every draw."""
    return st.sampled_from(values)


def _levels(
    pick: Callable[[MachineConfig], tuple[ClaimableLevel, ...]],
) -> st.SearchStrategy[ClaimableLevel]:
    """A level among those the running machine's config allows."""
    return st.runner().flatmap(lambda machine: _one_of(pick(machine.config)))


def _room(bundle: str, most: int) -> Callable[[BackendMachine], bool]:
    """A precondition: ``bundle`` holds fewer than ``most`` values.

    Without a cap, rules that only make names would take as many steps as the rules
    that send operations; capped, a program spends most of its steps on the backend.
    """
    return lambda machine: len(machine.bundle(bundle)) < most


class BackendMachine(RuleBasedStateMachine):
    """Writes, deletes, restores and reads against one backend, judged by the checkers.

    Bundles hold the entities, the attribute names (canonical and variant spellings),
    the facts, and the wordings of facts (each fact is also its own plain wording).

    A violation found at a step is raised at that step, unless a concurrent burst ran
    earlier in the program: from then on what the backend answers depends on thread
    timing, so the step a violation shows at varies from run to run, and Hypothesis
    needs every run of one program to make the same steps. The violation is then held
    and raised by ``teardown()``.
    """

    entities: Bundle[Entity] = Bundle("entities")
    attributes: Bundle[Attribute] = Bundle("attributes")
    facts: Bundle[FactWording] = Bundle("facts")
    paraphrases: Bundle[FactWording] = Bundle("paraphrases")

    def __init__(self, config: MachineConfig) -> None:
        super().__init__()
        self.config = config
        self._owns_pool = config.pool is None
        self._pool = HandlePool(config.factory) if config.pool is None else config.pool
        config.tally.started()
        self._main = self._pool.get(MAIN)
        self._main.reset()
        self._suite = CheckerSuite(level=config.level)
        self._recorder = HistoryRecorder(keep=False, observers=[self._suite.observe])
        self._seen = dict.fromkeys(config.checkers, 0)
        self._held: InvariantViolated | None = None
        self._held_at = 0
        self._timing_dependent = False
        self._clock = 0
        self._op_ids = itertools.count()
        self._steps = 0
        self._echo_lock = threading.Lock()
        self.model = ContractModel()

    # -- the things a program talks about --------------------------------------------

    @initialize(target=attributes)
    def init_attributes(self) -> MultipleResults[Attribute]:
        self._step("init_attributes: the attribute names "
                   + ", ".join(repr(a.name) for a in CANONICAL.values()))
        return multiple(*CANONICAL.values())

    @initialize(targets=(facts, paraphrases), slot=st.sampled_from(MACHINE_SLOTS),
                obj=st.integers(0, OBJECTS - 1))
    def init_facts(self, slot: str, obj: int) -> MultipleResults[FactWording]:
        """A fact, its negation, and a fact about another slot: every program can write
        from its first step, two facts that must never merge compete for one slot, and
        an entity can hold two records."""
        other = next(s for s in MACHINE_SLOTS if s != slot)
        made = (
            _plain(CANONICAL[slot], obj, False),
            _plain(CANONICAL[slot], obj, True),
            _plain(CANONICAL[other], obj, False),
        )
        self._step("init_facts: the facts " + ", ".join(w.fact.id for w in made))
        return multiple(*made)

    @precondition(lambda self: bool(self.config.spelling_levels))
    @precondition(_room("attributes", len(MACHINE_SLOTS) + 2))
    @rule(
        target=attributes,
        attribute=attributes,
        level=_levels(lambda c: c.spelling_levels),
        pick=st.integers(0, 15),
    )
    def respell(self, attribute: Attribute, level: Paraphrase, pick: int) -> Attribute:
        made = attribute_variant(attribute, level, pick)
        self._step(f"respell: the attribute name {made.name!r}, for slot {made.slot}")
        return made

    @precondition(_room("attributes", len(MACHINE_SLOTS) + 2))
    @rule(target=attributes, attribute=attributes, suffix=st.sampled_from(TWINS))
    def twin_slot(self, attribute: Attribute, suffix: str) -> Attribute:
        """A slot of its own whose name differs from ``attribute``'s slot's only in
        Chinese characters (or is 256 characters long): what a store that keys
        attribute names by ASCII alone folds together."""
        made = twin(attribute, suffix)
        self._step(f"twin_slot: the attribute name {made.name!r}, for slot "
                   f"{made.slot}" + ("" if made is not attribute else ", already a twin"))
        return made

    @initialize(target=entities)
    def init_entities(self) -> MultipleResults[Entity]:
        self._step("init_entities: " + ", ".join(_where(e) for e in ENTITIES))
        return multiple(*ENTITIES)

    @precondition(_room("facts", 5))
    @rule(
        targets=(facts, paraphrases),
        attribute=attributes,
        obj=st.integers(0, OBJECTS - 1),
        negated=st.booleans(),
    )
    def new_fact(self, attribute: Attribute, obj: int, negated: bool) -> FactWording:
        made = _plain(attribute, obj, negated)
        self._step(f"new_fact: the fact {made.fact.id}, under attribute {attribute.name!r}")
        return made

    @precondition(_room("paraphrases", 7))
    @rule(
        target=paraphrases,
        attribute=attributes,
        obj=st.integers(0, OBJECTS - 1),
        negated=st.booleans(),
        text_class=st.sampled_from(TEXT_CLASSES),
        size=st.integers(0, PAYLOAD_SIZES - 1),
    )
    def payload_fact(self, attribute: Attribute, obj: int, negated: bool, text_class: str,
                     size: int) -> FactWording:
        """A fact whose value carries a payload of ``text_class``, 2**``size``
        characters in all: what a store that mangles values gets wrong. It is written
        as it is, never reworded: a paraphrase is of a fact's own text."""
        payload = Payload(text_class, 2**size)
        made = FactWording(fact(attribute, obj, negated, payload), attribute, "none")
        self._step(f"payload_fact: the fact {made.fact.id}, its value about "
                   f"{payload.length:,} characters of {text_class} text, under attribute "
                   f"{attribute.name!r}")
        return made

    @precondition(_room("paraphrases", 7))
    @rule(
        target=paraphrases,
        fact=facts,
        level=_levels(lambda c: c.paraphrase_levels),
        pick=st.integers(0, 15),
    )
    def reword(self, fact: FactWording, level: Paraphrase, pick: int) -> FactWording:
        """A paraphrase at ``level`` of the value, of the attribute name, or of both."""
        made = reworded(fact, level, pick)
        value = ("unchanged" if made.value_level == "none"
                 else f"reworded at level {made.value_level}")
        self._step(f"reword: the fact {made.fact.id} under attribute {made.attribute.name!r}, "
                   f"its value {value}")
        return made

    # -- operations ---------------------------------------------------------------------

    @rule(entity=entities, wording=paraphrases, lag=LAGS)
    def write(self, entity: Entity, wording: FactWording, lag: Lag) -> None:
        """``lag`` > 0 makes a late write: its causal_seq was drawn ``lag`` ops ago, or
        just before the entity's last delete (``"before delete"``; a fresh one if the
        entity was never deleted)."""
        how = "plain" if wording.level == "none" else f"a {wording.level} paraphrase"
        self._step(f"write to {_where(entity)} (memcert's ground truth: the fact "
                   f"{wording.fact.id}, {how})")
        op, meta, label = self._plan_write(entity, wording, lag)
        self._label(label)
        self._send(MAIN, op, meta, self._main)
        self._observe()

    @rule(entity=entities, lag=st.sampled_from((0, 0, 1, 3, 10)),
          reason=st.sampled_from(REASONS))
    def delete(self, entity: Entity, lag: int, reason: str | None) -> None:
        """``lag`` > 0 makes a late delete, drawn before operations already sent."""
        self._step(f"delete {_where(entity)}")
        op, label = self._plan_delete(entity, lag, reason)
        self._label(label)
        self._send(MAIN, op, None, self._main)
        self._observe()

    @precondition(lambda self: self.config.restore and bool(self.deleted()))
    @rule(entity=st.runner().flatmap(lambda machine: _one_of(machine.deleted())))
    def restore(self, entity: Entity) -> None:
        """Restore an entity the oracle says is deleted: the only restore that tests
        anything (a live entity's is merely refused)."""
        self._step(f"restore {_where(entity)}")
        seq, op_id = self._next()
        op = Restore(entity.namespace, entity.entity_id, seq, op_id)
        self._label(f"restore {self.model.restore(entity.namespace, entity.entity_id, seq)}")
        self._send(MAIN, op, None, self._main)
        self._observe()

    @rule(entity=entities)
    def read(self, entity: Entity) -> None:
        """Read through another handle than the machine's own: every handle must serve
        the same store."""
        self._step(f"read {_where(entity)} through a second handle")
        self._read(MAIN + 1, self._pool.get(MAIN + 1), entity)
        self._observe()

    _burst_op = st.one_of(  # mostly writes, which race the most; a delete now and then
        paraphrases, paraphrases, st.sampled_from(("read", "read", "read", "delete"))
    )

    @rule(
        entity=entities,
        ops=st.lists(_burst_op, min_size=2, max_size=12),
        threads=st.runner().flatmap(lambda machine: machine.config.thread_counts),
    )
    def burst(self, entity: Entity, ops: list[BurstOp], threads: int) -> None:
        """Send ``ops`` to ``entity`` (a wording is a write of it) in rounds of
        ``threads`` operations, each from its own thread and handle; the operations
        of a round start together, and a round starts when the last one has ended.
        Then read the entity back.

        Each operation gets its causal_seq in plan order before the threads start, as
        concurrent clients that drew their seqs and then raced to the backend. With
        one thread, a burst is a batch of operations in order, and nothing depends on
        timing.
        """
        self._step(f"burst: {len(ops)} operations on {_where(entity)}, "
                   + ("in order" if threads == 1 else f"{threads} threads racing"))
        if threads > 1:
            self._timing_dependent = True
        planned: list[tuple[Write | Delete | None, WriteMeta | None]] = []
        for step in ops:
            if isinstance(step, FactWording):
                op, meta, label = self._plan_write(entity, step, 0)
                planned.append((op, meta))
            elif step == "delete":
                delete, label = self._plan_delete(entity)
                planned.append((delete, None))
            else:
                planned.append((None, None))
                label = "read"
            self._label(f"burst {label}")
        rounds = -(-len(planned) // threads)
        start = threading.Barrier(threads)
        errors: list[BaseException] = []

        def run(lane: int) -> None:
            worker = MAIN + 1 + lane
            backend = self._pool.get(worker)
            try:
                for k in range(rounds):
                    if threads > 1:
                        start.wait()
                    if k * threads + lane < len(planned):
                        op, meta = planned[k * threads + lane]
                        if op is None:
                            self._read(worker, backend, entity)
                        else:
                            self._send(worker, op, meta, backend)
            except threading.BrokenBarrierError:
                return
            except BaseException as error:  # a machine bug must not pass as a quiet burst
                errors.append(error)
                start.abort()

        if threads == 1:
            run(0)
        else:
            workers = [threading.Thread(target=run, args=(t,), name=f"memcert-burst-{t}")
                       for t in range(threads)]
            for thread in workers:
                thread.start()
            for thread in workers:
                thread.join()
        if errors:
            raise errors[0]
        self._observe()

    def deleted(self) -> tuple[Entity, ...]:
        """The entities the oracle says are deleted now."""
        return tuple(e for e in ENTITIES if self.model.is_deleted(e.namespace, e.entity_id))

    def teardown(self) -> None:
        self._recorder.close()
        self.config.tally.add(self._suite.results())
        if self._owns_pool:
            self._pool.close()
        if self._held is not None:
            self._echo_violation(f"teardown: operations raced, so it raises what step "
                                 f"{self._held_at} showed,", self._held)
            _fail(self._held)

    # -- machinery ------------------------------------------------------------------------

    def _next(self, lag: int = 0) -> tuple[int, str]:
        """A causal_seq from the machine's Lamport clock, ``lag`` ops back, and an op_id."""
        self._clock += 1
        return max(0, self._clock - lag), f"op-{next(self._op_ids)}"

    def _plan_write(
        self, entity: Entity, wording: FactWording, lag: Lag
    ) -> tuple[Write, WriteMeta, str]:
        ns, eid = entity.namespace, entity.entity_id
        if isinstance(lag, int):
            seq, op_id = self._next(lag)
        else:
            seq, op_id = self._next()
            deleted_at = self.model.delete_seq(ns, eid)
            if deleted_at is not None:
                seq = max(0, deleted_at - 1)
        value = wording.value(entity.tag, self.config.max_value_bytes)
        op = Write(ns, eid, wording.attribute.name, value, seq, op_id)
        meta = WriteMeta(wording.fact.id, wording.fact.slot, wording.level)
        decision = self.model.write(ns, eid, wording.fact.slot, wording.fact.id, seq)
        return op, meta, f"write {decision}"

    def _plan_delete(
        self, entity: Entity, lag: int = 0, reason: str | None = REASONS[0]
    ) -> tuple[Delete, str]:
        seq, op_id = self._next(lag)
        op = Delete(entity.namespace, entity.entity_id, seq, op_id, reason=reason)
        return op, f"delete {self.model.delete(entity.namespace, entity.entity_id, seq)}"

    def _send(
        self, worker: int, op: Write | Delete | Restore, meta: WriteMeta | None,
        backend: MemoryBackend,
    ) -> None:
        """Record the invocation, make the call, record its outcome as the runner does."""
        invocation = self._recorder.invoke(worker, op, meta=meta)
        try:
            ack = send(backend, op)
        except NotImplementedError as error:
            if isinstance(op, Restore):
                self.config.tally.restore_supported = False
                self._recorder.fail(invocation, f"unsupported: {describe_error(error)}")
            else:
                self._recorder.info(invocation, describe_error(error))
            self._echo_sent(invocation.index, op, f"raised {describe_error(error)}")
            return
        except Exception as error:  # the outcome is unknown: it may have been applied
            self._recorder.info(invocation, describe_error(error))
            self._echo_sent(invocation.index, op, f"raised {describe_error(error)}")
            return
        if ack.applied:
            self._recorder.ok(invocation, ack)
        else:
            self._recorder.fail(invocation, ack)
        self._echo_sent(invocation.index, op, _ack(ack))

    def _read(
        self, worker: int, backend: MemoryBackend, entity: Entity, *, back: bool = False
    ) -> None:
        """Read ``entity``; ``back`` marks the reads that end a step, when echoed."""
        op = Read(entity.namespace, entity.entity_id)
        invocation = self._recorder.invoke(worker, op)
        try:
            records = backend.read(entity.namespace, entity.entity_id)
        except Exception as error:  # a read that raised tells nothing
            self._recorder.fail(invocation, describe_error(error))
            self._echo_read(invocation.index, entity, f"raised {describe_error(error)}", back)
            return
        served = tuple(records)  # as the recorder takes them, so both see the same
        self._recorder.ok(invocation, served)
        self._echo_read(invocation.index, entity, served, back)

    def _observe(self) -> None:
        """End a step: read every entity back, then look for violations.

        The checkers judge reads, so a step is only checked once its effects have been
        read; reading every entity makes each step checked in full at its end.
        """
        for entity in ENTITIES:
            self._read(MAIN, self._main, entity, back=True)
        self._check()

    def _label(self, label: str) -> None:
        """Count the decision the oracle expects, in the run's tally and, when running
        under Hypothesis, in its statistics."""
        self.config.tally.decided(label)
        if currently_in_test_context():
            event(label)

    def _check(self) -> None:
        """Raise, or hold until teardown, a judged checker's violations since last step."""
        if self._held is not None:
            return
        counts = self._suite.violation_counts()
        fresh = [name for name in self.config.checkers if counts[name] > self._seen[name]]
        if not fresh:
            return
        results = self._suite.results()
        found: list[tuple[str, Violation]] = []
        for name in fresh:
            found += [(name, v) for v in results[name].violations[self._seen[name]:counts[name]]]
            self._seen[name] = counts[name]
        violated = VIOLATED[fresh[0]](tuple(found), concurrent=self._timing_dependent)
        if self._timing_dependent:
            self._held = violated
            self._held_at = self._steps
            return
        self._echo_violation(f"step {self._steps} shows", violated)
        _fail(violated)

    # -- echo: what a printed program shows as it runs ------------------------------------

    def _step(self, what: str) -> None:
        """Count a step, as the printed program numbers them, and show it when echoing."""
        self._steps += 1
        if self.config.echo:
            self._say(textwrap.wrap(f"step {self._steps}  {what}", ECHO_WIDTH,
                                    subsequent_indent=" " * 8, break_long_words=False))

    def _say(self, lines: list[str]) -> None:
        """Print ``lines`` together: a burst's threads echo operations at once."""
        if self.config.echo:
            with self._echo_lock:
                print("\n".join(lines), flush=True)

    def _echo_sent(self, index: int, op: Write | Delete | Restore, answer: str) -> None:
        """Show an operation as the backend received it, then its answer, in the form
        explanations show them; ``op N`` is its invocation's index in the history."""
        if not self.config.echo:
            return
        where = f"{op.namespace}/{op.entity_id}"
        if isinstance(op, Write):
            sent = (f"write {where} {_named(op.attribute)} = {_quoted(op.value)} causal_seq "
                    f"{op.causal_seq} op_id {op.op_id}")
            sent += "" if op.source is None else f" source {op.source!r}"
        else:
            method = "delete" if isinstance(op, Delete) else "restore"
            sent = f"{method} {where} causal_seq {op.causal_seq} op_id {op.op_id}"
            if isinstance(op, Delete) and op.reason is not None:
                sent += f" reason {op.reason!r}"
        self._say([*_fitted(f"  op {index}: {sent}"), f"     -> {answer}"])

    def _echo_read(
        self, index: int, entity: Entity, served: Sequence[Record] | str, back: bool
    ) -> None:
        """Show a read and every record it returned (or what it raised); ``back`` marks
        the reads that end every step."""
        if not self.config.echo:
            return
        mark = "  (the step's read back)" if back else ""
        head = f"  op {index}: read {_where(entity)}"
        if isinstance(served, str):
            self._say([f"{head}{mark}", f"     -> {served}"])
            return
        lines = [f"{head} -> {len(served)} record{'' if len(served) == 1 else 's'}{mark}"]
        lines += [f"     [{n}] {_named(r.attribute)} = {_quoted(r.value)} "
                  f"causal_seq {r.causal_seq} version {r.version}" for n, r in enumerate(served)]
        self._say(lines)

    def _echo_violation(self, where: str, violated: InvariantViolated) -> None:
        """Show the explanations of a violation about to be raised."""
        if not self.config.echo:
            return
        lines = [f"{where} a violation of {', '.join(violated.checkers)}:"]
        for number, violation in enumerate(violated.violations):
            text = render_explanation(violation)
            lines += [""] * bool(number)
            lines += [wrapped for line in text.splitlines() for wrapped in _fitted(line)]
        self._say(lines)


ECHO_WIDTH = 100
"""The widest line a printed program prints, where a value allows."""


def _where(entity: Entity) -> str:
    return f"{entity.namespace}/{entity.entity_id}"


_OPERATION = re.compile(r"^ *\w* ?op \d+: (write|delete|restore) ")
"""An operation's line, as the echo and the explanations' backend view show it."""


def _fitted(line: str) -> list[str]:
    """``line`` within :data:`ECHO_WIDTH` where it can be: an operation's line breaks
    before its causal_seq, so that its value stays whole on one line; prose wraps."""
    if len(line) <= ECHO_WIDTH:
        return [line]
    if _OPERATION.match(line) and " causal_seq " in line:
        head, _, tail = line.partition(" causal_seq ")
        return [head, f"{' ' * 7}causal_seq {tail}"]
    return textwrap.wrap(line, ECHO_WIDTH) or [""]


def _ack(ack: Ack) -> str:
    """``Ack(applied=..., version=..., reason=...)``, the fields left out while None."""
    fields = [f"applied={ack.applied}"]
    fields += [] if ack.version is None else [f"version={ack.version}"]
    fields += [] if ack.reason is None else [f"reason={ack.reason!r}"]
    return f"Ack({', '.join(fields)})"


def _quoted(value: str) -> str:
    """A value as the explanations' view shows it: quoted, invisible characters escaped,
    a long one cut to its head and tail with its length, so that a printed program's
    steps and the explanation it ends with read alike."""
    return quote(value, VALUE_WIDTH)


def _named(attribute: str) -> str:
    """An attribute name as the explanations' view shows it."""
    return quote(attribute, NAME_WIDTH, "'")


def _plain(attribute: Attribute, obj: int, negated: bool) -> FactWording:
    """A fact in its plain form: its canonical text, under ``attribute``."""
    return FactWording(fact(attribute, obj, negated), attribute, "none")


def _fail(violated: InvariantViolated) -> NoReturn:
    """The one place a violation is raised, whether by a step or by teardown, so that
    Hypothesis sees one failure per checker rather than one per place."""
    raise violated
