"""One backend resolution: what every part of the harness calls a backend, and how."""

from __future__ import annotations

import functools

import pytest

import reference_store
from chaos.examples import in_memory
from invariants.adapters.http import HttpFactory
from invariants.errors import FactoryError, InvalidArgument
from invariants.factory import REFERENCE, ResolvedBackend, resolve_backend


def test_none_is_the_reference_store():
    resolved = resolve_backend(None)
    assert (resolved.factory, resolved.name, resolved.spec) == (
        reference_store.factory, REFERENCE, REFERENCE)


def test_a_spec_is_loaded_and_named_as_given():
    resolved = resolve_backend("chaos.examples:in_memory")
    assert resolved == ResolvedBackend(in_memory, "chaos.examples:in_memory",
                                       "chaos.examples:in_memory")


def test_a_bad_spec_is_a_factory_error():
    with pytest.raises(FactoryError, match=r"not of the form package\.module:callable"):
        resolve_backend("chaos.examples")


def test_an_importable_callable_is_named_by_the_spec_that_imports_it_back():
    factory = reference_store.factory
    resolved = resolve_backend(factory)
    spec = f"{factory.__module__}:factory"
    assert (resolved.factory, resolved.name, resolved.spec) == (factory, spec, spec)
    assert resolve_backend(spec).factory is factory


def test_a_closure_has_a_name_but_no_spec():
    def local():
        return reference_store.factory()

    resolved = resolve_backend(local)
    assert resolved.name == f"{__name__}:{local.__qualname__}"
    assert resolved.spec is None


@pytest.mark.parametrize("factory", [in_memory, functools.partial(reference_store.factory)],
                         ids=["instance", "partial"])
def test_a_callable_without_a_qualified_name_is_named_by_its_repr(factory):
    assert resolve_backend(factory) == ResolvedBackend(factory, repr(factory), None)


def test_an_http_factory_is_named_and_loaded_by_its_url():
    factory = HttpFactory("http://127.0.0.1:9")
    assert resolve_backend(factory) == ResolvedBackend(factory, "http://127.0.0.1:9",
                                                       "http://127.0.0.1:9")


def test_a_resolved_backend_passes_through_unchanged():
    resolved = resolve_backend(reference_store.factory)
    assert resolve_backend(resolved) is resolved


def test_what_is_not_callable_is_an_invalid_argument_naming_it():
    with pytest.raises(InvalidArgument, match=r"backend=42 \(type int\) is not a backend "
                                              "factory"):
        resolve_backend(42)  # type: ignore[arg-type]
