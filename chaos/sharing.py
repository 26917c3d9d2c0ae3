"""Whether a backend's store is shared across processes, asked of the store itself.

The process phase and ``crash_worker`` run workers in other processes. Against a store
that lives inside one process (a dict, an in-memory SQLite database), each process
would see a store of its own, and every write of another process would look lost: a
failure that is the harness's, not the backend's. So before such a plan runs, a child
process writes a probe and this process reads it back; if the probe is not there, the
plan is ``not run``, with the reason, and never counts as a pass.

The probe is written in a namespace of its own, unique to the call, and deleted once
read, so it meets no scenario's keys and no invariant checks it.
"""

from __future__ import annotations

import multiprocessing
import secrets
from queue import Empty

from invariants.backend import Delete, Write
from invariants.factory import load_factory

__all__ = ["PROBE_TIMEOUT_S", "not_shared"]

PROBE_TIMEOUT_S = 60.0
"""How long the child may take to import the backend and write the probe."""


def not_shared(spec: str | None, *, http: bool = False) -> str:
    """Why worker processes cannot share the store of ``spec``, or "" if they can.

    ``http`` says the backend is a service reached over HTTP: its store lives in the
    service, and worker processes would only add clients, which threads already are.
    """
    if http:
        return ("a service reached over HTTP keeps its store in its own processes: worker "
                "processes here would only add clients")
    if spec is None:
        return ("the factory was given as a callable, which a worker process cannot import; "
                "pass it as a spec, package.module:callable")
    try:
        factory = load_factory(spec)
    except Exception as error:
        return f"worker processes could not import {spec!r}: {error}"
    if getattr(factory, "shares_across_processes", True) is False:
        return f"{spec} keeps its store in one process (shares_across_processes = False)"
    namespace = f"memcert-probe-{secrets.token_hex(6)}"
    token = f"probe {secrets.token_hex(8)}"
    # This process's handle is opened first, as certify's are before any worker process
    # starts: a store that publishes where it lives on first use (the reference store's
    # temporary SQLite file) is then found by the child.
    backend = factory()
    try:
        problem = _in_child(spec, namespace, token)
        if problem:
            return f"a worker process could not write a probe to {spec}: {problem}"
        try:
            seen = any(record.value == token for record in backend.read(namespace, "probe"))
            backend.delete(Delete(namespace, "probe", 2, f"{namespace}-delete"))
        except Exception as error:
            return (f"this process could not read back the probe a worker process wrote "
                    f"to {spec}: {type(error).__name__}: {error}")
    finally:
        backend.close()
    if not seen:
        return (f"a probe that a child process wrote to {spec} was not visible here, so "
                "the store is not shared across processes (an in-memory store, for "
                "example): worker processes would each see a store of their own")
    return ""


def _in_child(spec: str, namespace: str, token: str) -> str:
    """Write the probe from a spawned child; what went wrong there, or ""."""
    context = multiprocessing.get_context("spawn")
    answers = context.Queue()
    child = context.Process(target=_write_probe, args=(spec, namespace, token, answers),
                            name="memcert-probe", daemon=True)
    child.start()
    try:
        problem: str = answers.get(timeout=PROBE_TIMEOUT_S)
    except Empty:
        problem = f"it did not answer within {PROBE_TIMEOUT_S:g} s"
    finally:
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join()
    return problem


def _write_probe(spec: str, namespace: str, token: str,
                 answers: multiprocessing.Queue[str]) -> None:
    """The child's side: write the probe with a handle of its own, and say how it went."""
    try:
        backend = load_factory(spec)()
        try:
            ack = backend.write(Write(namespace, "probe", "probe", token, 1,
                                      f"{namespace}-write"))
        finally:
            backend.close()
        answers.put("" if ack.applied else f"the write was refused ({ack.reason})")
    except Exception as error:
        answers.put(f"{type(error).__name__}: {error}")
