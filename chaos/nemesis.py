"""The nemesis: plays a plan's network timeline while its workers run (Jepsen's nemesis).

A plan with a ``network`` (:mod:`scenarios.network_plan`) runs here instead of plainly in
:func:`chaos.runner.run_workers`. Each client group gets a :class:`~chaos.proxy.FaultProxy`
in front of the service, and the workers of a group get their handles from an
:class:`~invariants.adapters.http.HttpFactory` pointed at that proxy. A thread runs the
timeline alongside them: a step fires once the scenario is ``at`` of the way through,
by steps done or by time spent out of its budget, whichever comes first, so the faults
land in the middle of the traffic on a fast machine and on a slow one alike.

What the nemesis must not do: touch the history (it only notes how long the history was
around each action, so coverage can tell which operations met which fault), or leave a
fault behind. When the workers are done it heals every proxy and restarts a crashed
service before the final reads, whatever the timeline said.

Such a plan needs a backend reached over HTTP, and a ``crash`` needs a service memcert
runs itself (``memcert certify --serve``). Any other backend gets a :class:`RunResult`
whose ``not_run`` says why, and nothing runs. Its workers are always threads of this
process, since the proxies and the service live here.
"""

from __future__ import annotations

import http.client
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from invariants.adapters.http import HttpBackend, HttpFactory, OutcomeUnknown
from invariants.backend import Ack, BackendFactory, Delete, Record, Restore, Write
from invariants.history import HistoryRecorder
from scenarios.network_plan import NemesisStep, Network
from scenarios.plan import Plan

from .faults import Clock
from .proxy import ProxyGroup
from .runner import RunResult, run_workers

__all__ = ["Nemesis", "ServiceControl", "not_runnable", "run_under_nemesis"]

_T = TypeVar("_T")
_POLL_S = 0.01
_IN_FLIGHT_WAIT_S = 1.0
"""How long a crash waits for an operation to be in flight before killing anyway."""


class ServiceControl(Protocol):
    """A service process the nemesis may crash. ``freeze`` returns once the service
    answers nothing more (until it is killed); ``restart`` returns once it answers again,
    on the same database and port; none of them may touch the data."""

    def freeze(self) -> None: ...

    def thaw(self) -> None: ...

    def kill(self) -> None: ...

    def restart(self) -> None: ...

    @property
    def running(self) -> bool: ...


def not_runnable(factory: BackendFactory, network: Network) -> str:
    """Why a plan with this network cannot run against ``factory``, or "" if it can."""
    if not isinstance(factory, HttpFactory):
        return ("needs a backend reached over HTTP, the faults sitting between the workers "
                "and the service: a service's URL, or --serve for the reference store")
    if network.uses_proxies and urllib.parse.urlsplit(factory.url).scheme.lower() != "http":
        return ("needs a plain http:// service: the fault proxy forwards TCP, and a TLS "
                "certificate would not match the proxy's address")
    if network.signals_service and _service_of(factory) is None:
        return ("needs a service memcert starts itself and can signal (SIGSTOP, SIGKILL, "
                "restart): let memcert run the reference store (memcert certify --serve "
                "[--db URL]), or give the command that starts yours (memcert certify "
                "http://127.0.0.1:{port} --service-cmd 'CMD ... {port} ...')")
    return ""


def run_under_nemesis(factory: BackendFactory, plan: Plan, recorder: HistoryRecorder,
                      clock: Clock, *, budget_s: float, deadline: float, first_worker: int,
                      on_step: Callable[[], None] | None = None,
                      stop: threading.Event | None = None) -> RunResult:
    """Run the plan's workers as threads while a :class:`Nemesis` plays its timeline;
    heal everything before returning. The caller does the final reads."""
    network = plan.network
    assert network is not None
    reason = not_runnable(factory, network)
    if reason:
        return RunResult(plan.scenario, plan.size, not_run=reason)
    assert isinstance(factory, HttpFactory)
    proxies = None
    if network.uses_proxies:
        parts = urllib.parse.urlsplit(factory.url)
        proxies = ProxyGroup((parts.hostname or "127.0.0.1", parts.port or 80), network.groups,
                             rng=random.Random(f"{plan.scenario}|{plan.seed}|proxies"))
        proxies.start()
    try:
        clients = _client_factories(factory, network, proxies)
        workers = {group: tuple(first_worker + k for k in range(len(plan.workers))
                                if network.group_of(k) == group) for group in network.groups}
        nemesis = Nemesis(network, recorder, proxies=proxies, service=_service_of(factory),
                          workers=workers, planned=plan.size, budget_s=budget_s,
                          deadline=deadline)

        def stepped() -> None:
            nemesis.step_done()
            if on_step is not None:
                on_step()

        nemesis.start()
        try:
            result = run_workers(factory, plan, range(len(plan.workers)), recorder, clock,
                                 deadline, first_worker, stepped,
                                 factory_of=lambda k: clients[network.group_of(k)], stop=stop)
        finally:
            nemesis.finish()
    finally:
        if proxies is not None:
            proxies.stop()
    result.faults_fired.update(nemesis.fired())
    result.nemesis = list(nemesis.events)
    return result


class Nemesis:
    """Plays a timeline on the proxies and the service, and notes what it did.

    Each entry of ``events`` is one action as data: the step (``do``, ``at``, its
    toxic, groups or ``down_s``), ``t_s`` (seconds since the start), ``begin`` and
    ``end`` (the history's length just before and just after the action took effect)
    and ``workers`` (the workers it acted on). A crash is two events, ``kill`` and
    ``restart``; the heal that always ends the run is a ``heal`` with ``final`` true.
    """

    def __init__(self, network: Network, recorder: HistoryRecorder, *,
                 proxies: ProxyGroup | None, service: ServiceControl | None,
                 workers: Mapping[str, tuple[int, ...]], planned: int, budget_s: float,
                 deadline: float) -> None:
        self.network = network
        self.events: list[dict[str, Any]] = []
        self._recorder = recorder
        self._proxies = proxies
        self._service = service
        self._workers = workers
        self._planned = max(planned, 1)
        self._budget_s = budget_s
        self._deadline = deadline
        self._done = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._toxic_groups: dict[str, tuple[str, ...]] = {}
        self._kills = 0
        self._restarts = 0
        self._pauses = 0
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._play, name="memcert-nemesis", daemon=True)

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def step_done(self) -> None:
        """A worker finished a step; the timeline moves on by steps as well as by time."""
        with self._lock:
            self._done += 1

    def progress(self) -> float:
        """How far through the scenario the run is, in [0, 1]: by steps done, or by time
        spent out of the budget, whichever is further."""
        by_time = (time.monotonic() - self._started) / self._budget_s if self._budget_s > 0 \
            else 1.0
        return min(1.0, max(self._done / self._planned, by_time))

    def finish(self) -> None:
        """Stop the timeline (an action under way completes), then heal everything and
        bring a crashed service back. Re-raises an error the timeline hit."""
        self._stop.set()
        self._thread.join()
        begin = len(self._recorder)
        if self._proxies is not None:
            self._proxies.heal()
        if self._service is not None and not self._service.running:
            self._service.restart()
            self._restarts += 1
        self._note({"do": "heal", "final": True}, begin, self._all_workers())
        if self._errors:
            raise self._errors[0]

    def fired(self) -> dict[str, int]:
        """The proxies' own counts (``group/toxic``, ``group/down``), and the service's
        ``kill`` and ``restart`` counts when the timeline crashes it."""
        counts = self._proxies.fired() if self._proxies is not None else {}
        if self.network.crashes:
            counts["kill"] = self._kills
            counts["restart"] = self._restarts
        if any(step.do == "pause" for step in self.network.timeline):
            counts["pause"] = self._pauses
        return counts

    def _play(self) -> None:
        try:
            for step in self.network.timeline:
                while self.progress() < step.at:
                    if self._stop.wait(_POLL_S):
                        return
                if self._stop.is_set() or time.monotonic() >= self._deadline:
                    return
                self._apply(step)
        except BaseException as error:  # a failed action must fail the run, not vanish
            self._errors.append(error)

    def _apply(self, step: NemesisStep) -> None:
        if step.do == "crash":
            self._crash(step)
            return
        if step.do == "pause":
            self._pause(step)
            return
        begin = len(self._recorder)
        proxies = self._proxies
        assert proxies is not None
        groups = step.groups or tuple(proxies)
        if step.do == "add_toxic":
            assert step.toxic is not None
            for group in groups:
                proxies[group].add(step.toxic)
            self._toxic_groups[step.toxic.name] = groups
        elif step.do == "remove_toxic":
            groups = self._toxic_groups.pop(step.name)
            for group in groups:
                proxies[group].remove_toxic(step.name)
        elif step.do == "partition":
            proxies.partition(*groups)
        else:
            proxies.heal()
            self._toxic_groups.clear()
        self._note(step.describe(), begin, self._workers_of(groups))

    def _crash(self, step: NemesisStep) -> None:
        """Crash the service with an operation in flight, then restart it after
        ``down_s``.

        The service is frozen first (SIGSTOP), which is a crash as far as it can tell:
        it answers nothing from then on. An operation invoked after that cannot have been
        answered, so once a worker has invoked one (or a moment has passed without any)
        the kill (SIGKILL) cuts it short for certain. Killing as soon as some operation
        was outstanding did not: its answer could already be on its way, and under load
        both kills of a run sometimes cut nothing, which left durability unknown."""
        service = self._service
        assert service is not None
        service.freeze()
        frozen_at = len(self._recorder)
        waited = time.monotonic() + _IN_FLIGHT_WAIT_S
        while self._recorder.outstanding_since(frozen_at) == 0 and time.monotonic() < waited:
            if self._stop.wait(0.001):
                break
        begin = len(self._recorder)
        service.kill()
        self._kills += 1
        self._note({**step.describe(), "do": "kill"}, begin, self._all_workers())
        self._stop.wait(step.down_s)
        begin = len(self._recorder)
        service.restart()
        self._restarts += 1
        self._note({**step.describe(), "do": "restart"}, begin, self._all_workers())

    def _pause(self, step: NemesisStep) -> None:
        """Freeze the service (SIGSTOP) for ``down_s``, then let it go on (SIGCONT): no
        operation is lost, but those in flight wait, and a client's timeout may fire."""
        service = self._service
        assert service is not None
        service.freeze()
        # Counted from the moment it is stopped: what was invoked before then and is
        # answered after the resume waited through the whole pause.
        begin = len(self._recorder)
        self._pauses += 1
        self._note(step.describe(), begin, self._all_workers())
        self._stop.wait(step.down_s)
        begin = len(self._recorder)
        service.thaw()
        self._note({**step.describe(), "do": "resume"}, begin, self._all_workers())

    def _note(self, event: dict[str, Any], begin: int, workers: list[int]) -> None:
        self.events.append({**event, "t_s": round(time.monotonic() - self._started, 3),
                            "begin": begin, "end": len(self._recorder), "workers": workers})

    def _workers_of(self, groups: tuple[str, ...]) -> list[int]:
        return sorted(worker for group in groups for worker in self._workers[group])

    def _all_workers(self) -> list[int]:
        return self._workers_of(tuple(self._workers))


class _Client:
    """A worker's handle through its group's proxy. After an operation that got no
    answer it waits ``backoff_s`` before answering the runner, as a client backs off,
    so a cut-off group does not burn its plan on refused connections. The wait falls
    inside an operation whose outcome is unknown anyway. A connection that failed
    without any answer is reported as injected, like the in-process faults."""

    def __init__(self, inner: HttpBackend, backoff_s: float) -> None:
        self.inner = inner
        self._backoff_s = backoff_s

    def write(self, op: Write) -> Ack:
        return self._call(self.inner.write, op)

    def delete(self, op: Delete) -> Ack:
        return self._call(self.inner.delete, op)

    def restore(self, op: Restore) -> Ack:
        return self._call(self.inner.restore, op)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        return self._call(self.inner.read, namespace, entity_id)

    def reset(self) -> None:
        self._call(self.inner.reset)

    def close(self) -> None:
        self.inner.close()

    def _call(self, method: Callable[..., _T], *args: Any) -> _T:
        try:
            return method(*args)
        except OutcomeUnknown as error:
            if self._backoff_s > 0:
                time.sleep(self._backoff_s)
            if isinstance(error.__cause__, OSError | http.client.HTTPException):
                # No answer at all, the nemesis's doing; an answer such as a 5xx stays
                # the backend's own error in the report.
                raise OutcomeUnknown(f"{error} (injected)") from error
            raise


def _client_factories(factory: HttpFactory, network: Network,
                      proxies: ProxyGroup | None) -> dict[str, BackendFactory]:
    """Per group, the factory of its workers' handles: onto the group's proxy, or onto
    the service itself when the timeline only crashes it."""
    parts = urllib.parse.urlsplit(factory.url)
    made: dict[str, BackendFactory] = {}
    for group in network.groups:
        url = factory.url
        if proxies is not None:
            host, port = proxies[group].listen_address
            url = urllib.parse.urlunsplit((parts.scheme, f"{host}:{port}", parts.path, "", ""))
        through = HttpFactory(url, token=factory.token, timeout_s=network.timeout_s)
        made[group] = _bound(through, network.backoff_s)
    return made


def _bound(factory: HttpFactory, backoff_s: float) -> BackendFactory:
    def make() -> _Client:
        return _Client(factory(), backoff_s)

    return make


def _service_of(factory: BackendFactory) -> ServiceControl | None:
    service = getattr(factory, "service", None)
    controls = ("freeze", "thaw", "kill", "restart")
    if all(callable(getattr(service, name, None)) for name in controls) and hasattr(
            service, "running"):
        return service
    return None
