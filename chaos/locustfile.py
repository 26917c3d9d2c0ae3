"""The Locust side of ``memcert load``: users that load a memory service and record it.

Run by Locust, never imported by memcert itself: importing Locust patches the standard
library with gevent. ``memcert load`` starts ``python -m locust -f chaos/locustfile.py``
(a master and its workers, or one local process) and judges what they recorded.

Three roles, by the Locust runner a process has:

- **Recording** (:class:`ProcessRecording`, in every process that runs users: a worker,
  or the local runner). Its users share one :class:`~invariants.history.HistoryRecorder`
  writing ``<out>/workers/worker-<index>.jsonl``, one Lamport-style
  :class:`HybridClock`, and a user-id range of their own (``index * USER_RANGE``), so
  ids never collide across processes. Every half second it sends the master what it
  recorded since, with a *mark* (a time before which it will send nothing more) and its
  requests' tally.
- **Aggregating** (the master, or the local runner). It merges the streams by time
  (:class:`~chaos.load_merge.Merger`) into the online checkers and the run's metrics,
  served on ``--memcert-metrics-port``, keeps a copy of the history of a worker on
  another machine, and at the end writes ``<out>/load.json`` (who recorded what, every
  request's timing). The verdict is not decided here: ``memcert load`` merges the files
  again after the run and checks them with the same checkers.
- **Users**. Contract operations go through :class:`~invariants.adapters.http.HttpBackend`,
  the adapter ``memcert certify http://...`` uses, so an answer maps to ok, fail or
  info exactly as in a certification: a timeout, a dropped connection or a 5xx is
  ``info`` (the operation may have been applied), never ``fail``. Store operations
  (search, recall, touch, forget, export) go through Locust's own HTTP client and are
  not part of the history: they change nothing the contract reads, except forget,
  which only touches a scratch namespace.

When the run stops, the master asks every worker to stop its users (``memcert_stop``)
and waits for each one's last batch, so every operation invoked is recorded with its
completion before Locust quits.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import time
import urllib.parse
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import gevent  # type: ignore[import-untyped]  # gevent ships no type information
from locust import FastHttpUser, constant, events, task
from locust.env import Environment
from locust.event import EventHook
from locust.runners import MasterRunner, WorkerRunner

from chaos.load_merge import Clocks, Merger, to_local, write_entries
from chaos.load_mix import HybridClock, Keyspace, UserScript
from chaos.metrics import Exporter, LoadMetrics, MetricsOptions, RequestTally
from invariants.adapters.http import DEFAULT_TIMEOUT_S, HttpBackend
from invariants.backend import Ack, Delete, Restore, Write, send
from invariants.checkers import CheckerSuite
from invariants.history import (
    Entry,
    HistoryRecorder,
    Paraphrase,
    Read,
    WriteMeta,
    describe_error,
)

log = logging.getLogger("memcert.load")

USER_RANGE: Final = 1_000_000
"""History worker ids of worker ``i``'s users are ``i * USER_RANGE + n``."""
SEND_EVERY_S: Final = 0.5
STOP_GRACE_S: Final = 20.0
"""How long the master waits, after the users' own stop timeout, for a worker's last batch."""
TOKEN_ENV: Final = "MEMCERT_TOKEN"
HISTORY_MESSAGE: Final = "memcert_history"
STOP_MESSAGE: Final = "memcert_stop"

_Handler = TypeVar("_Handler", bound=Callable[..., None])


def _listens(hook: EventHook) -> Callable[[_Handler], _Handler]:
    """``@hook.add_listener`` with its type kept: Locust's own decorator is untyped, so the
    functions it registers would lose their signatures to the type checker."""
    add = cast(Callable[[Callable[..., None]], None], hook.add_listener)

    def register(handler: _Handler) -> _Handler:
        add(handler)
        return handler

    return register


@_listens(events.init_command_line_parser)
def _options(parser: Any) -> None:
    group = parser.add_argument_group("memcert")
    group.add_argument("--memcert-out", default="memcert-load", help="the run's folder")
    group.add_argument("--memcert-run", default="run", help="the run's id, in its namespaces")
    group.add_argument("--memcert-seed", type=int, default=0, help="seed of the users' choices")
    group.add_argument("--memcert-level", default="lexical", help="widest paraphrase written")
    group.add_argument("--memcert-mix", default="balanced", help="operation mix")
    group.add_argument("--memcert-entities", type=int, default=8, help="entities per namespace")
    group.add_argument("--memcert-backend", default="", help="the backend label of metrics")
    group.add_argument("--memcert-metrics-port", type=int, default=-1,
                       help="serve the run's metrics here (0: any free port; -1: off)")


@dataclass(frozen=True)
class Settings:
    """The ``--memcert-*`` options, as the master sent them to every worker."""

    out: Path
    run: str
    seed: int
    level: Paraphrase
    mix: str
    entities: int
    metrics_port: int
    host: str
    backend: str

    @classmethod
    def of(cls, environment: Environment) -> Settings:
        o = environment.parsed_options
        assert o is not None, "Locust parses the command line before any test starts"
        return cls(Path(o.memcert_out), o.memcert_run, int(o.memcert_seed), o.memcert_level,
                   o.memcert_mix, int(o.memcert_entities), int(o.memcert_metrics_port),
                   environment.host or "", o.memcert_backend or environment.host or "")

    def history(self, index: int) -> Path:
        return self.out / "workers" / f"worker-{index}.jsonl"


class ProcessRecording:
    """One process's users' history, and its stream to the aggregator."""

    def __init__(self, settings: Settings, index: int,
                 deliver: Callable[[dict[str, Any]], None]) -> None:
        self.settings = settings
        self.index = index
        self.token = os.environ.get(TOKEN_ENV) or None
        self.keys = Keyspace(settings.run, settings.entities)
        self.clock = HybridClock(index)
        self.clocks = Clocks.here()
        self.tally = RequestTally()
        self._deliver = deliver
        self._users = itertools.count()
        self._outbox: list[Entry] = []
        path = settings.history(index)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.recorder = HistoryRecorder(path, keep=False, observers=[self._outbox.append])
        self._sender = gevent.spawn(self._send_every)
        self._closed = False

    def new_user(self) -> int:
        return next(self._users)

    def on_request(self, request_type: str, name: str, response_time: float,
                   response_length: int, exception: BaseException | None,
                   **_kw: Any) -> None:
        """Locust's request event: time every request to the microsecond, as it was sent."""
        self.tally.add(name, exception is None, response_time / 1000)

    def close(self) -> None:
        """After the users stopped: close the file and send the last batch."""
        if self._closed:
            return
        self._closed = True
        self._sender.kill(block=True)
        self.recorder.close()
        self._send(done=True)

    def _send_every(self) -> None:
        while True:
            gevent.sleep(SEND_EVERY_S)
            self._send(done=False)

    def _send(self, *, done: bool) -> None:
        # The mark is read first: whatever is recorded after it is stamped after it.
        mark = time.monotonic_ns()
        entries = self._outbox[:]
        del self._outbox[:]
        self._deliver({
            "index": self.index, "clocks": self.clocks.to_dict(), "mark_ns": mark,
            "done": done, "entries": [entry.to_dict() for entry in entries],
            "requests": self.tally.take()})


@dataclass
class _Source:
    clocks: Clocks
    entries: int = 0
    done: bool = False
    copied: bool = False


class Aggregator:
    """The master's part: merge the workers' streams, serve the metrics, write load.json."""

    def __init__(self, settings: Settings, users: Callable[[], int]) -> None:
        self.settings = settings
        self.clocks = Clocks.here()
        self.merger = Merger()
        self.sources: dict[int, _Source] = {}
        self.started = time.time()
        self.metrics = LoadMetrics(backend=settings.backend, users=users,
                                   workers=lambda: len(self.sources))
        self.online: CheckerSuite | None = None
        self.exporter: Exporter | None = None
        if settings.metrics_port >= 0:
            self.online = CheckerSuite(level=settings.level)
            options = MetricsOptions(port=settings.metrics_port, on_serving=_announce)
            self.exporter = Exporter.start(
                options, backend=settings.backend, suite="load", level=settings.level,
                seed=settings.seed, violations=self.online.violation_counts,
                rate_terms=self.online.rate_terms, causes=self.online.cause_counts)
            self.exporter.registry.register(self.metrics)
            self.exporter.begin_scenario("load")

    def expect(self, index: int) -> None:
        """A worker that will send: hold the merge back until it has."""
        self.merger.open(index)

    def receive(self, data: dict[str, Any]) -> None:
        index = int(data["index"])
        clocks = Clocks(**data["clocks"])
        source = self.sources.get(index)
        if source is None:
            source = self.sources[index] = _Source(clocks)
        entries = [Entry.from_dict(item) for item in data["entries"]]
        if clocks.boot_id != self.clocks.boot_id:
            entries = [replace(e, time_ns=to_local(e.time_ns, clocks, self.clocks))
                       for e in entries]
            path = self.settings.history(index)
            if not source.copied:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("", encoding="utf-8")
                source.copied = True
            write_entries(path, entries)
        source.entries += len(entries)
        source.done = source.done or bool(data["done"])
        self.merger.add(index, entries, to_local(int(data["mark_ns"]), clocks, self.clocks),
                        done=source.done)
        self.metrics.merge(data["requests"])
        self._feed(self.merger.ready())

    def wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._all_done() and time.monotonic() < deadline:
            gevent.sleep(0.05)
        missing = sorted(i for i, s in self.sources.items() if not s.done)
        if missing:
            log.warning("no last batch from worker(s) %s within %.0f s; their histories may "
                        "end early", missing, timeout_s)

    def finish(self) -> None:
        self._feed(self.merger.drain())
        summary = {
            "run": self.settings.run, "host": self.settings.host, "seed": self.settings.seed,
            "level": self.settings.level, "mix": self.settings.mix,
            "entities": self.settings.entities, "clocks": self.clocks.to_dict(),
            "elapsed_s": round(time.time() - self.started, 3),
            "workers": [{"index": i, **s.clocks.to_dict(), "entries": s.entries,
                         "done": s.done, "copied": s.copied}
                        for i, s in sorted(self.sources.items())],
            "requests": self.metrics.snapshot(),
        }
        self.settings.out.mkdir(parents=True, exist_ok=True)
        (self.settings.out / "load.json").write_text(json.dumps(summary, indent=2) + "\n",
                                                     encoding="utf-8")

    def close(self) -> None:
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None

    def _all_done(self) -> bool:
        return all(source.done for source in self.sources.values()) and \
            self.merger.expected <= set(self.sources)

    def _feed(self, entries: list[Entry]) -> None:
        if self.online is None or self.exporter is None:
            return
        for entry in entries:
            self.online.observe(entry)
            self.exporter.observe(entry)


def _announce(port: int) -> None:
    print(f"memcert: serving metrics at http://127.0.0.1:{port}/metrics", file=sys.stderr,
          flush=True)


class _Node:
    """What one Locust process holds for memcert: its recording, its aggregator, or both."""

    def __init__(self) -> None:
        self.recording: ProcessRecording | None = None
        self.aggregator: Aggregator | None = None


_NODES: weakref.WeakKeyDictionary[Environment, _Node] = weakref.WeakKeyDictionary()


def _node(environment: Environment) -> _Node:
    return _NODES.setdefault(environment, _Node())


@_listens(events.init)
def _init(environment: Environment, **_kw: Any) -> None:
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        runner.register_message(HISTORY_MESSAGE, _on_history)
    if isinstance(runner, WorkerRunner):
        runner.register_message(STOP_MESSAGE, _on_stop)


def _on_history(environment: Environment, msg: Any) -> None:
    aggregator = _node(environment).aggregator
    if aggregator is not None:
        aggregator.receive(msg.data)


def _on_stop(environment: Environment, msg: Any) -> None:
    assert environment.runner is not None
    environment.runner.stop()


@_listens(events.test_start)
def _test_start(environment: Environment, **_kw: Any) -> None:
    runner = environment.runner
    assert runner is not None
    node = _node(environment)
    settings = Settings.of(environment)
    if not isinstance(runner, WorkerRunner) and node.aggregator is None:
        node.aggregator = Aggregator(settings, lambda: runner.user_count)
        if isinstance(runner, MasterRunner):
            worker_index = cast(Callable[[str], int], runner.get_worker_index)  # untyped
            for client in runner.clients.all:
                node.aggregator.expect(worker_index(client.id))
    if isinstance(runner, MasterRunner) or node.recording is not None:
        return
    if isinstance(runner, WorkerRunner):
        def deliver(data: dict[str, Any]) -> None:
            runner.send_message(HISTORY_MESSAGE, data)
        index = runner.worker_index
    else:
        aggregator = node.aggregator
        assert aggregator is not None
        deliver, index = aggregator.receive, 0
        aggregator.expect(0)
    node.recording = ProcessRecording(settings, index, deliver)
    _listens(environment.events.request)(node.recording.on_request)


@_listens(events.test_stop)
def _test_stop(environment: Environment, **_kw: Any) -> None:
    node = _node(environment)
    runner = environment.runner
    if node.recording is not None:
        node.recording.close()
    if node.aggregator is None:
        return
    if isinstance(runner, MasterRunner):
        for client in runner.clients.all:
            runner.send_message(STOP_MESSAGE, client_id=client.id)
        node.aggregator.wait(environment.stop_timeout + STOP_GRACE_S)
    node.aggregator.finish()


@_listens(events.quitting)
def _quitting(environment: Environment, **_kw: Any) -> None:
    aggregator = _node(environment).aggregator
    if aggregator is not None:
        aggregator.close()


class MemoryUser(FastHttpUser):
    """A client of the memory service: contract and store operations, with no think time."""

    wait_time = constant(0)
    network_timeout = DEFAULT_TIMEOUT_S
    connection_timeout = DEFAULT_TIMEOUT_S

    def on_start(self) -> None:
        node = _node(self.environment)
        recording = node.recording
        assert recording is not None, "test_start creates the recording before any user"
        self.recording = recording
        number = recording.new_user()
        self.worker = recording.index * USER_RANGE + number
        settings = recording.settings
        self.script = UserScript(recording.keys, mix=settings.mix, level=settings.level,
                                 seed=settings.seed, worker_index=recording.index, user=number,
                                 clock=recording.clock)
        self.backend = HttpBackend(settings.host, token=recording.token,
                                   timeout_s=DEFAULT_TIMEOUT_S)
        self.headers = {} if recording.token is None else {
            "Authorization": f"Bearer {recording.token}"}

    def on_stop(self) -> None:
        self.backend.close()

    @task
    def step(self) -> None:
        getattr(self, f"_{self.script.choose()}")()

    # -- contract operations, recorded ---------------------------------------------------

    def _write(self) -> None:
        op, meta = self.script.write()
        self._change("write", op, meta)

    def _delete(self) -> None:
        self._change("delete", self.script.delete(), None)

    def _restore(self) -> None:
        self._change("restore", self.script.restore(), None)

    def _read(self) -> None:
        namespace, entity_id = self.script.read()
        recorder = self.recording.recorder
        invocation = recorder.invoke(self.worker, Read(namespace, entity_id))
        started = time.perf_counter()
        try:
            records = self.backend.read(namespace, entity_id)
        except BaseException as error:
            # A read that fails tells nothing, whatever the reason: as the runner does.
            recorder.fail(invocation, describe_error(error))
            self._report("read", started, error)
            if not isinstance(error, Exception):
                raise
            return
        recorder.ok(invocation, records)
        self._report("read", started, None)
        if records:
            self.script.clock.observe(max(r.causal_seq for r in records))

    def _change(self, name: str, op: Write | Delete | Restore, meta: WriteMeta | None) -> Ack:
        recorder = self.recording.recorder
        invocation = recorder.invoke(self.worker, op, meta=meta)
        started = time.perf_counter()
        try:
            ack = send(self.backend, op)
        except NotImplementedError as error:
            # The service has no restore: it certainly did not happen.
            recorder.fail(invocation, f"unsupported: {describe_error(error)}")
            self._report(name, started, None)
            return Ack(False, None, "unsupported")
        except BaseException as error:
            # Timeouts, dropped connections, 5xx (OutcomeUnknown), a refusal, or this
            # user killed mid-request: the operation may have been applied.
            recorder.info(invocation, describe_error(error))
            self._report(name, started, error)
            if not isinstance(error, Exception):
                raise
            return Ack(False, None, "unknown")
        (recorder.ok if ack.applied else recorder.fail)(invocation, ack)
        self._report(name, started, None)
        return ack

    def _report(self, name: str, started: float, error: BaseException | None) -> None:
        self.environment.events.request.fire(
            request_type="POST", name=name, response_time=(time.perf_counter() - started) * 1000,
            response_length=0, exception=error, context={}, url=None)

    # -- store operations, not recorded ----------------------------------------------------

    def _search(self) -> None:
        self._post("search", self.script.search())

    def _recall(self) -> None:
        self._post("recall", self.script.recall())

    def _touch(self) -> None:
        self._post("touch", self.script.touch())

    def _forget(self) -> None:
        op, meta = self.script.scratch_write()
        if self._change("write", op, meta).applied:
            self._post("forget", {"namespace": op.namespace, "entity_id": op.entity_id})

    def _export(self) -> None:
        query = urllib.parse.urlencode({"namespace": self.script.export()})
        self.client.get(f"/v1/export?{query}", name="export", headers=self.headers)

    def _post(self, name: str, body: dict[str, Any]) -> None:
        self.client.post(f"/v1/{name}", json=body, name=name, headers=self.headers)
