"""Adapters that put other memory backends behind the contract in :mod:`invariants.backend`.

An adapter only translates: it maps entity and attribute onto the backend's keys,
carries ``causal_seq`` as data, and maps delete onto the backend's own delete. It never
adds locking, ordering or deduplication the backend lacks, because then memcert would
certify the adapter instead of the backend. Each adapter sits in its own module so that
importing one never imports another backend's dependencies.
"""
