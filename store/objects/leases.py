"""Leases on an `ObjectStore`: at most one holder of a name at a time, for as long as it renews, with no file
system and no lock server: what a fit's worker holds while it runs, where the workers share nothing but the
store.

A lease is a small JSON object ``{"holder": ..., "expires": t}`` at its key. `acquire` creates it
(`ObjectStore.create`: one of any number of racing creators wins), or takes it over by compare-and-swap
(`ObjectStore.replace`) when it has expired, was released, or is the caller's own; `renew` and `release` are
compare-and-swaps on the version the holder last wrote, so a holder whose lease was taken over learns it
(`LeaseLost`) instead of overwriting the new holder's. Expiry reads the caller's clock: the holders' clocks
must agree to well within ``ttl`` (NTP keeps them within milliseconds; the default ttl is `TTL_SECONDS`). A
holder that dies stops renewing and its lease is free ``ttl`` after its last renewal; a store that restarts
keeps its objects, so the leases survive it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from store.objects.interface import ObjectExists, ObjectMissing, ObjectStore, ObjectStoreError, VersionMismatch

TTL_SECONDS = 60.0


class LeaseLost(ObjectStoreError):
    """The lease was taken over (it had expired) or released since its holder last wrote it."""


@dataclass(frozen=True)
class Lease:
    """A lease held: its key, holder, expiry (the epoch seconds of the holder's clock) and the version written."""

    key: str
    holder: str
    expires: float
    version: str


def _document(holder: str | None, expires: float) -> bytes:
    return json.dumps({"holder": holder, "expires": expires}, sort_keys=True).encode()


def marker_live(store: ObjectStore, key: str, stale_s: float, now: Callable[[], float] = time.time) -> bool:
    """Whether the marker at ``key`` (``{"started": epoch seconds, ...}``: a delete in progress) is younger than
    ``stale_s``; an older one is work that died, removed here if unchanged since read. One read."""
    try:
        stored = store.get(key)
    except ObjectMissing:
        return False
    try:
        started = float(json.loads(stored.data)["started"])
    except (ValueError, KeyError, TypeError):
        started = 0.0
    if now() - started < stale_s:
        return True
    try:
        store.delete(key, stored.version)
    except VersionMismatch:
        pass
    return False


def delete_behind_marker(store: ObjectStore, prefix: str, document: str, marker: str, started: float,
                         **note) -> None:
    """Delete every object under ``prefix`` (a resource's): a marker at ``marker`` first (``{"started":
    started, **note}``, `marker_live` for whoever meets it), then ``document`` (the resource is gone for readers),
    the rest at once (`ObjectStore.delete_many`), and the marker last. A delete that dies leaves the marker, stale
    after the caller's time. One listing and four requests, plus one per thousand objects."""
    store.put(marker, json.dumps({"started": started, **note}).encode())
    store.delete(document)
    store.delete_many([key for key in store.keys(prefix) if key != marker])
    store.delete(marker)


def holder_of(store: ObjectStore, key: str, now: Callable[[], float] = time.time) -> str | None:
    """Who holds the lease at ``key`` now, None if nobody (none, released or expired). One read."""
    try:
        doc = json.loads(store.get(key).data)
    except ObjectMissing:
        return None
    return doc.get("holder") if doc.get("holder") and float(doc.get("expires", 0)) > now() else None


def acquire(store: ObjectStore, key: str, holder: str, ttl: float = TTL_SECONDS,
            now: Callable[[], float] = time.time) -> Lease | None:
    """Take the lease at ``key`` for ``holder`` until ``now() + ttl``: the lease, or None while another holder's
    is live (or another caller won a race for it). One to three requests."""
    expires = now() + float(ttl)
    data = _document(holder, expires)
    try:
        return Lease(key, holder, expires, store.create(key, data))
    except ObjectExists:
        pass
    try:
        current = store.get(key)
    except ObjectMissing:  # released and deleted between the two calls: race for it again, once
        try:
            return Lease(key, holder, expires, store.create(key, data))
        except ObjectExists:
            return None
    doc = json.loads(current.data)
    if doc.get("holder") not in (None, holder) and float(doc.get("expires", 0)) > now():
        return None
    try:
        return Lease(key, holder, expires, store.replace(key, data, current.version))
    except (VersionMismatch, ObjectMissing):
        return None


def renew(store: ObjectStore, lease: Lease, ttl: float = TTL_SECONDS, now: Callable[[], float] = time.time) -> Lease:
    """The lease extended to ``now() + ttl``; `LeaseLost` if it is no longer the one ``lease`` wrote. One request."""
    expires = now() + float(ttl)
    try:
        return Lease(lease.key, lease.holder, expires,
                     store.replace(lease.key, _document(lease.holder, expires), lease.version))
    except (VersionMismatch, ObjectMissing):
        raise LeaseLost(f"{lease.key}: the lease of {lease.holder!r} was taken over or released", lease.key) from None


def release(store: ObjectStore, lease: Lease) -> bool:
    """Give the lease up (a released document, by compare-and-swap): True, or False if it had been lost
    already. One request."""
    try:
        store.replace(lease.key, _document(None, 0.0), lease.version)
        return True
    except (VersionMismatch, ObjectMissing):
        return False


__all__ = ["Lease", "LeaseLost", "acquire", "renew", "release", "holder_of", "TTL_SECONDS"]
