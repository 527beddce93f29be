"""Incremental fetch sessions (KIP-227): FetchSessionCache and the per-request FetchContext.

A fetcher opens a session with a full fetch request (session id 0, epoch 0) listing every
partition; the broker answers with a session id. Later requests carry (session id, epoch
1, 2, ...) and only the partitions whose fetch parameters changed, plus partitions to forget;
the broker remembers the rest. Responses to incremental requests only contain partitions with
news: records, a changed high watermark or log start offset, or an error.

Request metadata (session id, epoch) decides the context:

=================  ======================  ===============================================
session id         epoch                   context
=================  ======================  ===============================================
0                  -1 (FINAL)              sessionless full fetch, no session created
0                  0 (INITIAL)             full fetch, a new session is created if it fits
N                  -1                      session N is closed, sessionless full fetch
N                  0                       session N is closed, a new one is created
N                  > 0 matching N's epoch  incremental fetch on N, N's epoch advances
N                  > 0 not matching        INVALID_FETCH_SESSION_EPOCH
N unknown          > 0                     FETCH_SESSION_ID_NOT_FOUND
=================  ======================  ===============================================

The cache holds at most ``max_entries`` sessions (``max.incremental.fetch.session.cache.slots``).
When full, a new session evicts, in Kafka's order: any session unused for ``eviction_ms``; else
the least valuable evictable session if the new one is worth more (followers are privileged
over consumers, then more partitions beat fewer). A session is protected from eviction by
consumers for ``eviction_ms`` after it is created.

The fetcher's side is ``FetchSessionHandler`` (a follower's replica fetcher keeps one per
leader): it turns the partitions wanted in a round into a full or an incremental request and
starts over with a full one whenever the two sides may disagree.

Pure: no I/O; the clock is injected. Not thread-safe. The contexts' ``..._in_slices`` variants
(a response of many partitions, decision 0057) only yield to the loop, through the
``LoopSlices`` they are given.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.broker.clock import SYSTEM_TIME, Time
from kafkalite.broker.types import UNKNOWN_OFFSET, FetchInfo, FetchPartitionData
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 0x7FFFFFFF
DEFAULT_EVICTION_MS = 120_000  # min.incremental.fetch.session.eviction.ms


# (session, partition, what it was just answered) -> whether the leader will unpark it on news
ParkHook = Callable[["FetchSession", TopicPartition, FetchPartitionData], bool]
# (session, partition) -> None: the session's follower forgot a partition it had parked
ForgetParkedHook = Callable[["FetchSession", TopicPartition], None]


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == INT32_MAX:
        return 1
    return epoch + 1


class CachedPartition:
    """A partition of a session: last request parameters and last response values sent.

    ``info`` is the FetchInfo of the last request parameters, made once when they change and
    handed to every later incremental fetch as it is."""

    __slots__ = (
        "topic_partition",
        "info",
        "max_bytes",
        "fetch_offset",
        "high_watermark",
        "current_leader_epoch",
        "fetcher_log_start_offset",
        "local_log_start_offset",
        "last_fetched_epoch",
    )

    def __init__(self, tp: TopicPartition, info: FetchInfo) -> None:
        self.topic_partition = tp
        self.high_watermark = UNKNOWN_OFFSET
        self.local_log_start_offset = UNKNOWN_OFFSET
        self.update_request_params(info)

    def update_request_params(self, info: FetchInfo) -> None:
        self.info = info
        self.max_bytes = info.max_bytes
        self.fetch_offset = info.fetch_offset
        self.current_leader_epoch = info.current_leader_epoch
        self.fetcher_log_start_offset = info.log_start_offset
        self.last_fetched_epoch = info.last_fetched_epoch

    def fetch_info(self) -> FetchInfo:
        return self.info

    def maybe_update_response_data(self, data: FetchPartitionData, update: bool) -> bool:
        """Whether ``data`` must be sent in an incremental response; with ``update`` the
        cached values are moved to what is sent."""
        records = data.records
        must_respond = records is not None and len(records) > 0
        if self.high_watermark != data.high_watermark:
            must_respond = True
            if update:
                self.high_watermark = data.high_watermark
        if self.local_log_start_offset != data.log_start_offset:
            must_respond = True
            if update:
                self.local_log_start_offset = data.log_start_offset
        if data.preferred_read_replica >= 0 or data.diverging_epoch is not None:
            must_respond = True
        if data.error_code is not ErrorCode.NONE:
            # Errors are always sent; forgetting the HW makes the partition be sent again once
            # the error is gone.
            if update:
                self.high_watermark = UNKNOWN_OFFSET
            must_respond = True
        return must_respond


@dataclass(eq=False)
class FetchSession:
    """One session. ``fetch_infos`` mirrors ``partitions`` (same keys, same order) with each
    partition's current FetchInfo: an incremental fetch reads it as it is, so a request that
    changes nothing rebuilds no per-partition state.

    A follower's session (when the cache has a ``park`` hook) also keeps ``parked``: the
    partitions whose last answer told the follower everything (it has the leader's whole log,
    the high watermark and log start offset it was sent are the leader's) and whose leader
    will call ``unpark`` when any of that moves. ``active`` is ``fetch_infos`` without them:
    what an incremental fetch reads, so a round costs O(partitions with news), not
    O(partitions followed). ``waiter`` (set by a fetch waiting for news) is called on unpark."""

    id: int
    privileged: bool
    partitions: dict[TopicPartition, CachedPartition]
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1
    fetch_infos: dict[TopicPartition, FetchInfo] = field(default_factory=dict)
    replica_id: int = -1
    parked: set[TopicPartition] = field(default_factory=set)
    active: dict[TopicPartition, FetchInfo] = field(default_factory=dict)
    waiter: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        self.fetch_infos = {tp: c.info for tp, c in self.partitions.items()}
        self.active = dict(self.fetch_infos)

    def unpark(self, tp: TopicPartition) -> bool:
        """``tp`` has news: read it again from the next round on. True if it was parked."""
        if tp not in self.parked:
            return False
        self.parked.discard(tp)
        info = self.fetch_infos.get(tp)
        if info is not None:
            self.active[tp] = info
        waiter = self.waiter
        if waiter is not None:
            waiter()
        return True

    @property
    def size(self) -> int:
        return len(self.partitions)

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(
        self, fetch_infos: Mapping[TopicPartition, FetchInfo], forgotten: Iterable[TopicPartition]
    ) -> tuple[list[TopicPartition], list[TopicPartition], list[TopicPartition]]:
        """Apply an incremental request; returns (added, updated, removed)."""
        added, updated, removed = [], [], []
        mirror = self.fetch_infos
        active = self.active
        parked = self.parked
        for tp, info in fetch_infos.items():
            cached = self.partitions.get(tp)
            if cached is None:
                self.partitions[tp] = CachedPartition(tp, info)
                added.append(tp)
            else:
                cached.update_request_params(info)
                updated.append(tp)
            mirror[tp] = info  # a new key goes last, as in partitions; a known one stays put
            active[tp] = info  # new parameters: read it this round
            parked.discard(tp)
        for tp in forgotten:
            if self.partitions.pop(tp, None) is not None:
                del mirror[tp]
                active.pop(tp, None)
                parked.discard(tp)
                removed.append(tp)
        return added, updated, removed

    def move_to_back(self, tp: TopicPartition) -> None:
        """``tp`` returned data: it goes last, so the next response's byte budget favours the
        others (fairness across partitions)."""
        self.partitions[tp] = self.partitions.pop(tp)
        self.fetch_infos[tp] = self.fetch_infos.pop(tp)
        info = self.active.pop(tp, None)
        if info is not None:
            self.active[tp] = info

    def park_idle(
        self,
        park: ParkHook,
        response_data: Iterable[tuple[TopicPartition, FetchPartitionData]],
    ) -> None:
        """After an answer: park each partition of ``response_data`` (what was read this
        round) that the follower now knows everything about, if its leader agrees to tell."""
        partitions = self.partitions
        none = ErrorCode.NONE
        for tp, data in response_data:
            cached = partitions.get(tp)
            if (
                cached is None
                or data.error_code is not none
                or data.records
                or data.diverging_epoch is not None
                or data.preferred_read_replica >= 0
                or cached.fetch_offset != data.log_end_offset
                or cached.high_watermark != data.high_watermark
                or cached.local_log_start_offset != data.log_start_offset
                or tp in self.parked
            ):
                continue
            if park(self, tp, data):
                self.parked.add(tp)
                self.active.pop(tp, None)


class FetchContext:
    """What a Fetch handler needs for one request: the partitions to read (``fetch_infos``),
    or an ``error_code`` for the whole response, and the response selection."""

    error_code: ErrorCode = ErrorCode.NONE

    def __init__(self, fetch_infos: dict[TopicPartition, FetchInfo]) -> None:
        self.fetch_infos = fetch_infos

    def update_and_generate_response(
        self, results: Mapping[TopicPartition, FetchPartitionData]
    ) -> tuple[list[tuple[TopicPartition, FetchPartitionData]], int]:
        """(partitions to put in the response, in order; the session id to answer with)."""
        raise NotImplementedError

    async def update_and_generate_response_in_slices(
        self, results: Mapping[TopicPartition, FetchPartitionData], slices: Any, chunk: int
    ) -> tuple[list[tuple[TopicPartition, FetchPartitionData]], int]:
        """``update_and_generate_response`` for a response of many partitions, ``chunk`` at a
        time, awaiting ``slices.pause()`` when ``slices.due()`` (a
        ``kafkalite.storage.loop_slices.LoopSlices``) between chunks: the same answer and session
        state as one call when nothing changes meanwhile. Each partition's bookkeeping stands
        on its own (its cached values, whether it is parked: the park hook checks the leader's
        state as it is then), so news between chunks is handled as news after the answer."""
        return self.update_and_generate_response(results)


class SessionErrorContext(FetchContext):
    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__({})
        self.error_code = error_code

    def update_and_generate_response(self, results):
        return [], INVALID_SESSION_ID


class SessionlessFetchContext(FetchContext):
    def update_and_generate_response(self, results):
        return [(tp, results[tp]) for tp in self.fetch_infos if tp in results], INVALID_SESSION_ID


class FullFetchContext(FetchContext):
    def __init__(
        self,
        cache: FetchSessionCache,
        fetch_infos: dict[TopicPartition, FetchInfo],
        is_from_follower: bool,
        replica_id: int = -1,
    ) -> None:
        super().__init__(fetch_infos)
        self.cache = cache
        self.is_from_follower = is_from_follower
        self.replica_id = replica_id

    def update_and_generate_response(self, results):
        response = [(tp, results[tp]) for tp in self.fetch_infos if tp in results]

        def create_partitions() -> dict[TopicPartition, CachedPartition]:
            partitions: dict[TopicPartition, CachedPartition] = {}
            self._add_cached_partitions(partitions, response)
            return partitions

        session = self._create_session(response, create_partitions)
        if session is None:
            return response, INVALID_SESSION_ID
        if self._parks(session):
            session.park_idle(self.cache.park, response)  # type: ignore[arg-type]
        return response, session.id

    async def update_and_generate_response_in_slices(self, results, slices, chunk):
        response = [(tp, results[tp]) for tp in self.fetch_infos if tp in results]
        partitions: dict[TopicPartition, CachedPartition] = {}
        for start in range(0, len(response), chunk):
            self._add_cached_partitions(partitions, response[start : start + chunk])
            if slices.due():
                await slices.pause()
        session = self._create_session(response, lambda: partitions)
        if session is None:
            return response, INVALID_SESSION_ID
        if self._parks(session):
            for start in range(0, len(response), chunk):
                session.park_idle(self.cache.park, response[start : start + chunk])  # type: ignore[arg-type]
                if start + chunk < len(response) and slices.due():
                    await slices.pause()
        return response, session.id

    def _add_cached_partitions(
        self,
        partitions: dict[TopicPartition, CachedPartition],
        response: Iterable[tuple[TopicPartition, FetchPartitionData]],
    ) -> None:
        fetch_infos = self.fetch_infos
        for tp, data in response:
            cached = CachedPartition(tp, fetch_infos[tp])
            cached.maybe_update_response_data(data, True)
            partitions[tp] = cached

    def _create_session(
        self,
        response: list[tuple[TopicPartition, FetchPartitionData]],
        create_partitions: Callable[[], dict[TopicPartition, CachedPartition]],
    ) -> FetchSession | None:
        cache = self.cache
        session_id = cache.maybe_create_session(
            cache.time.milliseconds(), self.is_from_follower, len(response), create_partitions
        )
        return cache.sessions[session_id] if session_id != INVALID_SESSION_ID else None

    def _parks(self, session: FetchSession) -> bool:
        """A follower's new session on a leader that parks: its replica noted, True."""
        if self.cache.park is None or self.replica_id < 0:
            return False
        session.replica_id = self.replica_id
        return True


class IncrementalFetchContext(FetchContext):
    def __init__(self, cache: FetchSessionCache, session: FetchSession) -> None:
        # The session's own mapping, not a copy: the replica manager copies what it keeps.
        # Without its parked partitions (see FetchSession): those have no news to read.
        super().__init__(session.active)
        self.cache = cache
        self.session = session

    @property
    def waits_for_news(self) -> bool:
        """Nothing to read this round but parked partitions: the fetch should wait for one of
        them to have news (or its max wait) rather than answer empty at once."""
        session = self.session
        return not session.active and bool(session.parked)

    def update_and_generate_response(self, results):
        session = self.session
        partitions = session.partitions
        response = []
        none = ErrorCode.NONE
        for tp, data in results.items():
            cached = partitions.get(tp)
            if cached is None:
                continue  # forgotten meanwhile
            if (
                not data.records
                and data.error_code is none
                and data.high_watermark == cached.high_watermark
                and data.log_start_offset == cached.local_log_start_offset
                and data.diverging_epoch is None
                and data.preferred_read_replica < 0
            ):
                # Nothing new (most partitions of a session, most of the time): decided here,
                # without a call; maybe_update_response_data has the same rules in full.
                continue
            if cached.maybe_update_response_data(data, True):
                response.append((tp, data))
                if data.records:
                    session.move_to_back(tp)
        park = self.cache.park
        if park is not None and session.replica_id >= 0:
            session.park_idle(park, results.items())
        return response, session.id

    async def update_and_generate_response_in_slices(self, results, slices, chunk):
        # The incremental bookkeeping is per partition (the cached values, moving a partition
        # with records to the back, parking), so chunk by chunk is the same as in one go.
        items = list(results.items())
        response = []
        for start in range(0, len(items), chunk):
            part, _ = self.update_and_generate_response(dict(items[start : start + chunk]))
            response.extend(part)
            if start + chunk < len(items) and slices.due():
                await slices.pause()
        return response, self.session.id


class FetchSessionCache:
    def __init__(
        self,
        max_entries: int = 1000,
        eviction_ms: int = DEFAULT_EVICTION_MS,
        time: Time = SYSTEM_TIME,
        rng: random.Random | None = None,
        park: ParkHook | None = None,
        forget_parked: ForgetParkedHook | None = None,
    ) -> None:
        # ``park`` (the leader's ReplicaManager.park_idle_partition): followers' sessions
        # skip the partitions with no news (see FetchSession); None reads every partition.
        # ``forget_parked`` (ReplicaManager.forget_parked_partition): told of each parked
        # partition a follower's incremental fetch forgets.
        self.park = park
        self.forget_parked = forget_parked
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.time = time
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def new_context(
        self,
        session_id: int,
        session_epoch: int,
        fetch_infos: Mapping[TopicPartition, FetchInfo],
        forgotten: Iterable[TopicPartition] = (),
        is_follower: bool = False,
        replica_id: int = -1,
    ) -> FetchContext:
        """The context for one Fetch request (see the table in the module docstring)."""
        fetch_infos = dict(fetch_infos)
        forgotten = list(forgotten)
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if session_epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_infos)
            return FullFetchContext(self, fetch_infos, is_follower, replica_id)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != session_epoch:
            return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        left_parked = [tp for tp in forgotten if tp in session.parked] if session.parked else []
        session.update(fetch_infos, forgotten)
        if left_parked and self.forget_parked is not None:
            for tp in left_parked:  # before touch(): last_used_ms is still the last fetch's
                self.forget_parked(session, tp)
        if session.size == 0:
            self.remove(session.id)
            return SessionlessFetchContext({})
        self.touch(session, self.time.milliseconds())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(self, session)

    def _new_session_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, INT32_MAX)
            if candidate not in self.sessions:
                return candidate

    def maybe_create_session(self, now, privileged, size, create_partitions) -> int:
        """Create a session if there is room (possibly after an eviction); its id, or 0."""
        if self.max_entries <= 0:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_entries and not self.try_evict(privileged, size, now):
            return INVALID_SESSION_ID
        session = FetchSession(
            self._new_session_id(),
            privileged,
            create_partitions(),
            now,
            now,
            next_epoch(INITIAL_EPOCH),
        )
        self.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def touch(self, session: FetchSession, now: int) -> None:
        session.last_used_ms = now
        if session.cached_size >= 0:
            self.num_partitions -= session.cached_size
        session.cached_size = session.size
        self.num_partitions += session.cached_size

    def _evictable(self, session: FetchSession, by_privileged: bool, now: int) -> bool:
        protected = now - session.creation_ms <= self.eviction_ms
        if by_privileged:
            return not session.privileged or not protected
        return not protected

    def try_evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest.id)
            self.evictions += 1
            return True
        candidates = [s for s in self.sessions.values() if self._evictable(s, privileged, now)]
        if not candidates:
            return False
        least = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < least.evictable_key():
            return False
        self.remove(least.id)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None and session.cached_size >= 0:
            self.num_partitions -= session.cached_size
        return session


# -- the fetcher's side (Kafka's FetchSessionHandler) -------------------------------------------


@dataclass(slots=True)
class SessionFetchRequest:
    """One Fetch request of a session: what goes on the wire (``to_send``, ``to_forget``, the
    session id and epoch) and what the leader will read once it has applied it
    (``session_partitions``, every partition of the session with its current parameters)."""

    session_id: int
    epoch: int
    to_send: dict[TopicPartition, FetchInfo]
    to_forget: list[TopicPartition]
    session_partitions: dict[TopicPartition, FetchInfo]

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """The fetcher's half of a session with one broker (a follower's replica fetcher).

    ``build(wanted)`` turns the partitions to fetch this round into a request: a full one (every
    partition, epoch 0) when there is no session, else only the partitions added or whose
    parameters changed since the last request, and the ones no longer wanted as forgotten.
    ``handle_response`` checks the answer against the request and moves the session on;
    ``handle_error`` (the request failed: lost, timed out, connection closed) and any answer
    that does not fit make the next request a full one, which also closes the old session on
    the broker. Invariant: after every answered incremental request, the broker's session holds
    exactly ``session_partitions`` with these parameters; when in doubt the handler starts over
    (a full fetch is always correct, only larger).

    Pure, no I/O; one request at a time (the fetcher awaits each answer before building the
    next)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.next_epoch = INITIAL_EPOCH
        self.session_partitions: dict[TopicPartition, FetchInfo] = {}
        self._reset = False
        self.full_requests = 0
        self.incremental_requests = 0

    def build(self, wanted: Mapping[TopicPartition, FetchInfo]) -> SessionFetchRequest:
        wanted = dict(wanted)
        if self._reset:
            self._reset = False
            self.next_epoch = INITIAL_EPOCH
        if self.next_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self.session_partitions = wanted
            self.full_requests += 1
            return SessionFetchRequest(self.session_id, self.next_epoch, wanted, [], wanted)
        old = self.session_partitions
        to_send = {tp: info for tp, info in wanted.items() if old.get(tp) != info}
        to_forget = [tp for tp in old if tp not in wanted]
        self.session_partitions = wanted
        self.incremental_requests += 1
        return SessionFetchRequest(self.session_id, self.next_epoch, to_send, to_forget, wanted)

    def build_changed(
        self, wanted: Mapping[TopicPartition, FetchInfo], changed: Iterable[TopicPartition]
    ) -> SessionFetchRequest:
        """``build(wanted)`` in O(``changed``) for an incremental request: ``changed`` must
        name every partition whose entry in ``wanted`` may differ from the one in the last
        request built (added, altered or gone). The request is the one ``build`` makes (the
        property test holds them equal); a full request still copies all of ``wanted``.
        ``session_partitions`` is then updated in place, so a request's
        ``session_partitions`` is valid until the next one is built."""
        if self._reset:
            self._reset = False
            self.next_epoch = INITIAL_EPOCH
        if self.next_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            full = dict(wanted)
            self.session_partitions = full
            self.full_requests += 1
            return SessionFetchRequest(self.session_id, self.next_epoch, full, [], full)
        session = self.session_partitions
        to_send: dict[TopicPartition, FetchInfo] = {}
        to_forget: list[TopicPartition] = []
        for tp in changed:
            info = wanted.get(tp)
            old = session.get(tp)
            if info is None:
                if old is not None:
                    del session[tp]
                    to_forget.append(tp)
            elif old != info:
                session[tp] = info
                to_send[tp] = info
        self.incremental_requests += 1
        return SessionFetchRequest(self.session_id, self.next_epoch, to_send, to_forget, session)

    def handle_response(
        self,
        request: SessionFetchRequest,
        error_code: ErrorCode,
        response_session_id: int,
        partitions: Iterable[TopicPartition],
    ) -> bool:
        """Whether the answer's partitions may be used; moves the session to the next epoch,
        or back to a full request."""
        if error_code is not ErrorCode.NONE:
            if error_code is ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._start_over(INVALID_SESSION_ID)
            else:
                self._start_over(self.session_id)
            return False
        returned = set(partitions)
        if request.is_full:
            if returned != request.session_partitions.keys():
                # Each partition's answer stands on its own, but the broker's session (if it
                # made one) does not hold what we asked for: close it with the next request.
                self._start_over(response_session_id)
                return True
            self.session_id = response_session_id
            # No session on the broker (its cache full, or sessions off): stay full, try again.
            self.next_epoch = INITIAL_EPOCH if response_session_id == INVALID_SESSION_ID else 1
            return True
        if not returned <= request.session_partitions.keys():
            self._start_over(self.session_id)
            return False
        if response_session_id != self.session_id:
            # The broker closed the session (e.g. every partition was forgotten).
            self._start_over(INVALID_SESSION_ID)
            return response_session_id == INVALID_SESSION_ID
        self.next_epoch = next_epoch(self.next_epoch)
        return True

    def handle_error(self) -> None:
        """The request got no answer: the broker may or may not have applied it."""
        self._start_over(self.session_id)

    def reset(self) -> None:
        """Make the next request a full one that also closes the current session, even if a
        request in flight now is answered before it (the answer then does not undo this)."""
        self._reset = True

    def _start_over(self, session_id: int) -> None:
        # A full request naming a session (epoch 0) makes the broker close that one first.
        self.session_id = session_id
        self.next_epoch = INITIAL_EPOCH
